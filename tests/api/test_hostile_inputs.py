"""Hostile input gets a 422 naming the field (and the limit) in milliseconds, never a 500 or a
stall: a lone UTF-16 surrogate ("\\ud800", legal in a JSON escape, not encodable as UTF-8) in any
string field of any body of the three apps (the API, the online owner, the attribution owner:
before, each was a 500 and the 422 handler itself crashed echoing it); names longer than their
SQL columns; numbers beyond a double; lists of 100,000 elements (before: seconds to minutes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_api_docs import APPS, body_examples, operations, parameter_example

from litehit.db.migrate import upgrade
from litehit.settings import Settings


def string_leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from string_leaves(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_leaves(item, (*path, key))


def replaced(value: Any, path: tuple[str | int, ...], new: str) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(copy[path[0]], path[1:], new)  # type: ignore[index]
    return copy


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path / "home", sweep_interval_s=0, online_snapshot_s=3600)
    upgrade(settings.db_url)
    return settings


@pytest.mark.parametrize("which", APPS)
def test_a_lone_surrogate_in_any_string_field_is_a_422_naming_it(settings: Settings, which: str) -> None:
    with TestClient(APPS[which](settings), raise_server_exceptions=False) as client:
        doc = client.get("/openapi.json").json()
        tried = 0
        for path, method, operation in operations(doc):
            if "requestBody" not in operation:
                continue
            url = path
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    url = url.replace(f"{{{parameter['name']}}}", str(parameter_example(parameter)))
            for _, body in body_examples(doc, operation):
                for leaf in string_leaves(body):
                    text = json.dumps(replaced(body, leaf, "ok\ud800"))  # ASCII JSON: the escape \ud800
                    r = client.request(method, url, content=text, headers={"Content-Type": "application/json"})
                    where = (method, url, leaf)
                    assert r.status_code == 422, (where, r.status_code, r.text)
                    error = r.json()["error"]
                    assert error["details"][0]["loc"] == ["body", *leaf], where
                    assert "lone UTF-16 surrogate" in error["message"], where
                    tried += 1
        assert tried >= 3, tried  # every app has string fields in its examples


def test_a_surrogate_pair_is_text_and_a_raw_cesu_surrogate_is_not(settings: Settings) -> None:
    from api.main import create_app

    with TestClient(create_app(settings, enqueue=lambda *a: None), raise_server_exceptions=False) as client:
        emoji = json.dumps({"facts_path": "facts/\U0001f600.csv", "capacity_gb": [1]})
        r = client.post("/v1/queries", content=emoji, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "facts_path"]
        assert "not a file in the storage root" in r.text  # judged as a path, not refused as text
        raw = b'{"facts_path": "facts/\xed\xa0\x80.csv", "capacity_gb": [1]}'  # CESU-8 bytes of \ud800
        r = client.post("/v1/queries", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and "lone UTF-16 surrogate" in r.text


def test_the_error_shape_echoes_a_lone_surrogate_as_its_escape() -> None:
    from api.errors import _json_safe, error_body

    assert _json_safe({"a\ud800": ["x\udfff"]}) == {"a\\ud800": ["x\\udfff"]}
    body = error_body("validation_error", "bad \ud800", [{"loc": ["body"], "msg": "m\ud800", "input": None}])
    assert json.dumps(body, ensure_ascii=False).encode()  # encodable as UTF-8
    assert body["error"]["message"] == "bad \\ud800"


N = 100_000


def _instance(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "instance_group_name": "g",
        "instance_id": f"i{i}",
        "block_size": 512,
        "location_spec_infos": [{"name": "kv", "size": 1 << 20}],
        "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
        "optimizer_state_info": {"full_location_spec_group_name": "full"},
        **extra,
    }


TRACE = {"trace_file_path": "traces/t.jsonl", "block_size": 512}
ONE_LANE = {**TRACE, "instance_groups": [{"name": "g"}], "instances": [_instance(0)]}
HUGE: dict[str, tuple[str, dict[str, Any], list[str | int], str]] = {
    "block_sizes": ("/v1/replays", {**TRACE, "block_sizes": [512] * N}, ["block_sizes"], "at most 1024"),
    "ttl_seconds": ("/v1/replays", {**TRACE, "ttl_seconds": list(range(N))}, ["ttl_seconds"], "at most 1024"),
    "lanes": (
        "/v1/replays",
        {**TRACE, "trace_format": "mooncake", "block_sizes": [512] * 1000, "ttl_seconds": [0, 60]},
        ["block_sizes"],
        "at most 1,024 lanes",
    ),
    "capacity_gb": ("/v1/queries", {"facts_path": "f.csv", "capacity_gb": [1] * N}, ["capacity_gb"], "at most 256"),
    "targets": ("/v1/queries", {"facts_path": "f.csv", "capacity_gb": [1], "targets": [0.5] * N}, ["targets"], "64"),
    "policies": (
        "/v1/policy-sweeps",
        {**ONE_LANE, "sweep": {"policies": ["lru"] * N, "capacity_gb": [1]}},
        ["sweep", "policies"],
        "at most 5",
    ),
    "no capacities": (
        "/v1/policy-sweeps",
        {**ONE_LANE, "sweep": {"capacity_gb": []}},
        ["sweep", "capacity_gb"],
        "at least 1",
    ),
    "location_spec_infos": (
        "/v1/replays",
        {**ONE_LANE, "instances": [_instance(0, location_spec_infos=[{"name": f"k{j}", "size": 1} for j in range(N)])]},
        ["instances", 0, "location_spec_infos"],
        "at most 256",
    ),
    "location_spec_groups": (
        "/v1/replays",
        {**ONE_LANE, "instances": [_instance(0, location_spec_groups=[{"name": f"f{j}"} for j in range(N)])]},
        ["instances", 0, "location_spec_groups"],
        "at most 256",
    ),
    "instances": (
        "/v1/replays",
        {**ONE_LANE, "fanout_all_instances": True, "instances": [_instance(i) for i in range(1100)]},
        ["instances"],
        "at most 1024",
    ),
    "instance_id": (
        "/v1/replays",
        {**ONE_LANE, "instances": [_instance(0, instance_id="i" * N)]},
        ["instances", 0, "instance_id"],
        "at most 255 characters",
    ),
}


@pytest.mark.parametrize("case", HUGE)
def test_huge_lists_and_names_are_422_in_milliseconds(settings: Settings, case: str) -> None:
    import time

    from api.main import create_app

    path, body, loc, limit = HUGE[case]
    with TestClient(create_app(settings, enqueue=lambda *a: None), raise_server_exceptions=False) as client:
        start = time.perf_counter()
        r = client.post(path, json=body)
        seconds = time.perf_counter() - start
    assert r.status_code == 422, r.text[:500]
    detail = r.json()["error"]["details"][0]
    assert detail["loc"] == ["body", *loc] and limit in detail["msg"], detail
    assert len(r.content) < 20_000  # the echo of the offending value is cut short
    assert seconds < 5, seconds  # a bound on a hang, not a speed target: before, 16 s to minutes


def test_online_names_and_numbers_beyond_their_columns_are_422(settings: Settings) -> None:
    from api.online import create_online_app

    with TestClient(create_online_app(settings), raise_server_exceptions=False) as client:
        r = client.post("/v1/online/groups", json={"name": "g" * 300, "capacity_gb": [1]})
        assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "name"], r.text
        assert "at most 255 characters" in r.text
        r = client.post(
            "/v1/online/groups",
            content='{"name": "g", "capacity_gb": [' + "1" * 401 + "]}",
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "capacity_gb", 0], r.text
        assert client.post("/v1/online/groups", json={"name": "g", "capacity_gb": [1]}).status_code == 201
        r = client.post("/v1/online/instances", json={**_instance(0), "instance_id": "i" * N})
        assert r.status_code == 422 and "at most 255 characters" in r.text, r.text
        r = client.post("/v1/online/instances/" + "i" * 300 + "/trace-queries", json={"block_keys": [1]})
        assert r.status_code == 422, r.text
        r = client.post(
            "/v1/online/instances/i0/trace-queries/batch", json={"requests": [{"block_keys": [1]}] * 10_001}
        )
        assert r.status_code == 422 and "at most 10000" in r.text, r.text[:300]


def test_an_attribution_lookup_batch_of_100000_is_422(settings: Settings) -> None:
    from api.attribution import create_attribution_app

    with TestClient(create_attribution_app(settings), raise_server_exceptions=False) as client:
        body = {"lookups": [{"worker": "w", "block_hash": 1}] * N}
        r = client.post("/v1/attribution/lookups/batch", json=body)
    assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "lookups"], r.text[:300]
    assert "at most 10000" in r.text
