"""Submissions that would fail every time are refused at submission (422), not accepted and failed
in a worker: the whole config is validated with the uploaded trace's format (rows without
instance ids cannot be routed to two lanes without fanout or override), unknown fields are listed
first (a typo is the likeliest cause of what follows), and every list filters by ``?state=``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers import instance

from litehit.db.migrate import upgrade
from litehit.jobs.registry import kinds
from litehit.settings import Settings


@pytest.fixture
def client(tmp_path: Path, data_dir: Path) -> Iterator[TestClient]:
    from api.main import create_app

    settings = Settings(home=tmp_path / "home", sweep_interval_s=0)
    upgrade(settings.db_url)
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as c:
        head = b"".join((data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:50])
        r = c.post("/v1/traces?name=t.jsonl", content=head)
        assert r.status_code == 201, r.text
        c.trace_id = r.json()["id"]  # type: ignore[attr-defined]
        yield c


TWO = {
    "block_size": 512,
    "instance_groups": [{"name": "g"}],
    "instances": [instance("a", 512, group="g"), instance("b", 1024, group="g")],
}


@pytest.mark.parametrize("route", ["/v1/replays", "/v1/profiles"])
def test_two_lanes_on_a_trace_without_instance_ids_need_a_routing_rule(client: Any, route: str) -> None:
    r = client.post(route, json={**TWO, "trace_id": client.trace_id})
    assert r.status_code == 422, r.text
    detail = r.json()["error"]["details"][0]
    assert detail["loc"] == ["body", "instances"] and detail["input"] == ["a", "b"]
    assert "mooncake rows carry no instance id" in detail["msg"] and "fanout_all_instances" in detail["msg"]
    assert (
        client.post(route, json={**TWO, "trace_id": client.trace_id, "fanout_all_instances": True}).status_code == 202
    )


def test_an_unknown_field_comes_first_with_the_field_it_resembles(client: Any) -> None:
    body = {
        "trace_id": client.trace_id,
        "block_size": 512,
        "instance_groups": [{"name": "g", "modle": "Llama-3.1-8B"}],
        "instances": [{"instance_group_name": "g", "instance_id": "b512", "block_size": 512}],
    }
    r = client.post("/v1/replays", json=body)
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert details[0]["loc"] == ["body", "instance_groups", 0, "modle"]
    assert details[0]["msg"] == "unknown field (did you mean model?): a replay does not use it"
    assert "location_spec_infos must not be empty" in details[1]["msg"]  # what the typo caused
    fixed = {**body, "instance_groups": [{"name": "g", "model": "Llama-3.1-8B"}]}
    assert client.post("/v1/replays", json=fixed).status_code == 202


def test_every_list_filters_by_state_and_refuses_an_unknown_one(client: Any) -> None:
    one = {**TWO, "instances": TWO["instances"][:1], "trace_id": client.trace_id}
    bodies = {
        "replay": one,
        "profile": one,
        "policy_sweep": {**one, "sweep": {"capacity_gb": [1]}},
        "window": {**one, "window": {"capacity_gb": 1}},
        "routes": {**one, "routes": {"replicas": 2}},
    }
    created = {}
    for kind, body in bodies.items():
        route = next(k.route for k in kinds() if k.kind == kind)
        r = client.post(f"/v1{route}", json=body)
        assert r.status_code == 202, r.text
        created[kind] = r.json()["id"]
    replay = created["replay"]
    r = client.post("/v1/queries", json={"replay_id": replay, "capacity_gb": [1]})
    assert r.status_code == 202, r.text
    created["query"] = r.json()["id"]
    tiers = [{"name": "hbm", "capacity": "1GiB"}, {"name": "dram", "capacity": "inf"}]
    for kind, extra in (("tiers", {}), ("plan", {"target": {"hit_rate": 0.5}})):
        route = next(k.route for k in kinds() if k.kind == kind)
        r = client.post(f"/v1{route}", json={"replay_id": replay, "tiers": tiers, **extra})
        assert r.status_code == 202, r.text
        created[kind] = r.json()["id"]
    for kind in kinds():
        listed = client.get(f"/v1{kind.route}?state=queued").json()
        assert [j["id"] for j in listed["items"]] == [created[kind.kind]], kind.kind
        assert client.get(f"/v1{kind.route}?state=succeeded").json()["items"] == []
        r = client.get(f"/v1{kind.route}?state=bogus")
        assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["query", "state"]


def test_moments_carry_their_zone_in_every_answer(client: Any) -> None:
    """The embedded SQLite hands back naive datetimes: GET answered them without a zone while the
    POST answer (the row in memory) ended in Z."""
    posted = client.post("/v1/replays", json={**TWO, "trace_id": client.trace_id, "fanout_all_instances": True})
    got = client.get(posted.headers["location"]).json()
    assert posted.json()["created_at"] == got["created_at"] and got["created_at"].endswith("Z")
    listed = client.get("/v1/replays").json()["items"][0]
    assert listed["created_at"] == got["created_at"]
    trace = client.get(f"/v1/traces/{client.trace_id}").json()
    assert trace["created_at"].endswith("Z")
