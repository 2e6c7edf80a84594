"""Online mode: registration with the original rules, trace queries (single and batch), the
ListInstances counters, reconciliation with an offline replay + facts query, counters that
survive a restart, exactly one owner per shard, and the public API forwarding to owners."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers import config, group, instance, request, write_rows
from service_fixtures import ROOT, free_port, settings_env, wait_for

import core_c
from api.online import create_online_app
from litehit.db.migrate import upgrade
from litehit.db.models import utcnow
from litehit.errors import AlreadyRegistered, NotShardOwner, UnknownInstance, WrongShard
from litehit.jobs.replay import run_replay
from litehit.online.engine import TraceQuery
from litehit.online.owner import ShardOwner
from litehit.online.store import shard_of
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings
from litehit.spec import InstanceGroup, InstanceInfo, parse_replay_spec

GIB = 1 << 30
CAPS = [2 * 16384 / GIB, 3 * 16384 / GIB, 1.0]  # 2 and 3 blocks of 16 KiB, and 1 GiB


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(home=tmp_path, online_snapshot_s=3600)
    upgrade(s.db_url)
    return s


@pytest.fixture
def owner(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_online_app(settings)) as client:
        yield client


def register(
    client: TestClient,
    *,
    ttl: int = 0,
    max_cache: bool = True,
    prefix_hash: bool = False,
    name: str = "i1",
    grp: str = "g1",
) -> dict[str, Any]:
    r = client.post(
        "/v1/online/groups",
        json=group(
            grp,
            ttl,
            capacity_gb=list(reversed(CAPS)),
            enable_theoretical_max_cache=max_cache,
            enable_prefix_hash=prefix_hash,
        ),
    )
    assert r.status_code in (201, 409), r.text
    r = client.post("/v1/online/instances", json=instance(name, 4, group=grp))
    assert r.status_code == 201, r.text
    return r.json()


def test_registration_follows_the_original_rules(owner: TestClient) -> None:
    assert owner.post("/v1/online/groups", json=group(ttl_seconds=-1)).json()["error"]["details"][0]["loc"] == [
        "body",
        "ttl_seconds",
    ]
    assert owner.post("/v1/online/groups", json=group(eviction_policy="fifo")).status_code == 422
    assert owner.post("/v1/online/groups", json=group(capacity_gb=[1.0, -2.0])).json()["error"]["details"][0][
        "loc"
    ] == ["body", "capacity_gb", 1]
    assert owner.post("/v1/online/groups", json=group(ttl_seconds="x")).status_code == 422
    assert owner.post("/v1/online/groups", json=group()).status_code == 201
    assert owner.post("/v1/online/groups", json=group()).status_code == 409
    bad = owner.post("/v1/online/instances", json=instance("i1", 4, group="nope")).json()["error"]
    assert bad["details"][0]["loc"] == ["body", "instance_group_name"]
    assert "RegisterInstance[i1] failed: no instance group of that name" in bad["message"]
    assert owner.post("/v1/online/instances", json={**instance("i1", 4), "location_spec_infos": []}).status_code == 422
    assert owner.post("/v1/online/instances", json=instance("i1", 0)).status_code == 422
    created = owner.post("/v1/online/instances", json=instance("i1", 4))
    assert created.status_code == 201
    body = created.json()
    assert body["capacity_gb"] == [1.0] and body["block_bytes"] == 16384 and body["total_queries"] == 0
    assert owner.post("/v1/online/instances", json=instance("i1", 4)).status_code == 409


def test_trace_queries_single_and_batch(owner: TestClient) -> None:
    inst = register(owner)
    assert inst["capacity_gb"] == sorted(CAPS) and inst["capacity_blocks"] == [2, 3, 65536]
    r = owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [1, 2, 3], "input_token_len": 13})
    assert r.status_code == 200 and r.json()["hit_blocks"] == [0, 0, 0] and r.json()["max_hit_blocks"] == 0
    r = owner.post(
        "/v1/online/instances/i1/trace-queries/batch",
        json={
            "requests": [
                {"block_keys": [1, 2, 9], "input_token_len": 12},
                {"block_keys": [1, 2, 3], "input_token_len": 13},
            ]
        },
    )
    second, third = r.json()["results"]
    assert second["hit_blocks"] == [2, 2, 2] and third["hit_blocks"] == [2, 2, 3] and third["max_hit_blocks"] == 3
    assert third["hit_rates"] == [8 / 13, 8 / 13, 12 / 13]
    one = owner.get("/v1/online/instances/i1").json()
    assert (one["total_queries"], one["total_input_tokens"], one["total_hit_blocks"]) == (3, 38, [4, 4, 5])
    assert one["hit_rates"] == [16 / 38, 16 / 38, 20 / 38] and one["max_hit_blocks"] == 5
    assert one["unique_blocks"] == 4 and one["engine_memory_bytes"] > 0 and one["state_since"]


def test_missing_length_is_derived_and_max_is_hidden_when_disabled(owner: TestClient) -> None:
    register(owner, max_cache=False)
    owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [5, 6]})
    r = owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [5, 6]}).json()
    assert (
        r["input_token_len"] == 8
        and r["hit_blocks"] == [2, 2, 2]
        and r["max_hit_blocks"] == -1
        and r["max_hit_rate"] == -1
    )


def test_a_rejected_request_applies_nothing(owner: TestClient) -> None:
    register(owner)
    before = owner.get("/v1/online/instances/i1").json()
    r = owner.post(
        "/v1/online/instances/i1/trace-queries/batch",
        json={"requests": [{"block_keys": [1, 2], "input_token_len": 8}, {"block_keys": [1, 2], "input_token_len": 4}]},
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["details"][0]["loc"] == ["body", "requests", 1, "block_keys"]
    assert (
        "NormalizeRequest block_keys must contain exactly floor" in err["message"]
        and "nothing was applied" in err["message"]
    )
    after = owner.get("/v1/online/instances/i1").json()
    assert (
        (after["total_queries"], after["unique_blocks"]) == (before["total_queries"], before["unique_blocks"]) == (0, 0)
    )
    assert (
        owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [1], "input_token_len": 3}).status_code
        == 422
    )
    assert owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": ["x"]}).status_code == 422
    assert owner.post("/v1/online/instances/nope/trace-queries", json={"block_keys": [1]}).status_code == 404


def test_prefix_hash_groups_chain_raw_hashes(owner: TestClient) -> None:
    register(owner, prefix_hash=True)
    owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [7, 8]})
    r = owner.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [7, 9]}).json()
    assert r["hit_blocks"] == [1, 1, 1]  # raw [7,9] shares only the first prefix with [7,8]


def test_online_reconciles_with_offline_replay_and_query(owner: TestClient, tmp_path: Path) -> None:
    """The same requests online and offline (TTL group, same capacities): identical numbers."""
    rng = random.Random(12)
    register(owner, ttl=30)
    rows, t = [], 10**9
    for i in range(600):
        t += rng.randrange(0, 4 * 10**9)
        raw = [rng.randrange(3) for _ in range(rng.randint(1, 7))]
        rows.append(request(f"r{i}", t, [int(k) for k in core_c.prefix_hash(raw)], 4 * len(raw) + rng.randrange(4)))
    results = []
    for lo in range(0, len(rows), 100):
        batch = [
            {"block_keys": r["keys"], "input_token_len": r["input_len"], "timestamp_ns": r["timestamp_ns"]}
            for r in rows[lo : lo + 100]
        ]
        results += owner.post("/v1/online/instances/i1/trace-queries/batch", json={"requests": batch}).json()["results"]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir()
    run_replay(parse_replay_spec(config(trace, out, groups=[group(ttl_seconds=30)])))
    buf = io.BytesIO()
    summary = query_facts(out / "litehit_facts.csv", parse_capacities([repr(c) for c in sorted(CAPS)] + ["-1"]), buf)
    offline = [json.loads(line) for line in buf.getvalue().splitlines()[: len(rows)]]
    assert [r["hit_blocks"] + [r["max_hit_blocks"]] for r in results] == [o["hit_blocks"] for o in offline]
    online = owner.get("/v1/online/instances/i1").json()
    assert online["total_hit_blocks"] + [online["max_hit_blocks"]] == summary.total.total_hit_blocks
    assert online["total_input_tokens"] == summary.total.total_input_tokens
    assert online["hit_rates"] + [online["max_hit_rate"]] == summary.total.hit_rates


def test_counters_survive_a_restart_but_the_lru_starts_empty(settings: Settings) -> None:
    with TestClient(create_online_app(settings)) as first:
        register(first)
        first.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [1, 2], "input_token_len": 8})
        first.post("/v1/online/instances/i1/trace-queries", json={"block_keys": [1, 2], "input_token_len": 8})
        before = first.get("/v1/online/instances/i1").json()
    with TestClient(create_online_app(settings)) as second:
        after = second.get("/v1/online/instances/i1").json()
        assert after["total_queries"] == 2 and after["total_hit_blocks"] == before["total_hit_blocks"] == [2, 2, 2]
        assert after["snapshot_at"] is not None and after["state_since"] > before["state_since"]
        assert after["unique_blocks"] == 0
        r = second.post(
            "/v1/online/instances/i1/trace-queries", json={"block_keys": [1, 2], "input_token_len": 8}
        ).json()
        assert r["hit_blocks"] == [0, 0, 0]  # the LRU itself was rebuilt empty


def test_one_owner_per_shard(settings: Settings) -> None:
    with TestClient(create_online_app(settings)) as first:
        assert first.get("/healthz").json()["status"] == "ok"
        with (
            pytest.raises(RuntimeError, match="already owned by a live process"),
            TestClient(create_online_app(settings)),
        ):
            pass
    with TestClient(create_online_app(settings)) as again:  # released at shutdown
        assert again.get("/healthz").json()["status"] == "ok"


def test_instances_of_another_shard_are_refused(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, online_shards=2, online_shard=0)
    upgrade(s.db_url)
    foreign = next(f"i{n}" for n in range(100) if shard_of(f"i{n}", 2) == 1)
    with TestClient(create_online_app(s)) as owner:
        owner.post("/v1/online/groups", json=group())
        r = owner.post("/v1/online/instances", json=instance(foreign, 4))
        assert r.status_code == 421 and r.json()["error"]["code"] == "wrong_shard"


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


def test_shard_owner_snapshots_by_its_clock_and_restores(settings: Settings) -> None:
    clock = Clock()
    first = ShardOwner(settings.model_copy(update={"online_snapshot_s": 60}), clock=clock)
    first.claim()
    first.restore()
    assert first.last_snapshot is None and first.snapshot_due()
    first.create_group(InstanceGroup.model_validate(group()))
    with pytest.raises(AlreadyRegistered, match="instance group 'g1' already exists"):
        first.create_group(InstanceGroup.model_validate(group()))
    first.register(InstanceInfo.model_validate(instance("i1", 4)))
    first.query("i1", [TraceQuery([1, 2], 8), TraceQuery([1, 2], 8)])
    first.snapshot()
    taken = clock.now
    clock.now += timedelta(seconds=59)
    assert not first.snapshot_due()
    clock.now += timedelta(seconds=1)
    assert first.snapshot_due()
    first.release()
    assert not first.instances
    second = ShardOwner(settings, clock=clock)
    second.claim()
    second.restore()
    view = second.view(second.instance("i1"))
    assert view["snapshot_at"] == taken and (view["total_queries"], view["total_hit_blocks"]) == (2, [2])
    second.release()


def test_shard_owner_lease_and_shard_checks(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, online_shards=2, online_shard=0)
    upgrade(s.db_url)
    clock = Clock()
    first, second = ShardOwner(s, clock=clock, lease_s=15), ShardOwner(s, clock=clock, lease_s=15)
    first.claim()
    with pytest.raises(RuntimeError, match="already owned by a live process"):
        second.claim()
    foreign = next(f"i{n}" for n in range(100) if shard_of(f"i{n}", 2) == 1)
    with pytest.raises(WrongShard, match=f"instance {foreign} belongs to shard 1"):
        first.instance(foreign)
    with pytest.raises(UnknownInstance):
        first.instance(next(f"i{n}" for n in range(100) if shard_of(f"i{n}", 2) == 0))
    clock.now += timedelta(seconds=16)  # the first owner stopped renewing: its lease is free
    second.claim()
    assert not first.renew()
    with pytest.raises(NotShardOwner, match="no longer owns online shard 0"):
        first.instance("i1")
    with pytest.raises(RuntimeError, match=r"LITEHIT_ONLINE_SHARD=2 must be in \[0, 2\)"):
        ShardOwner(s.model_copy(update={"online_shard": 2})).claim()
    second.release()


@pytest.mark.service
def test_public_api_forwards_to_two_shard_owners(service_settings: Settings, tmp_path: Path) -> None:
    from api.main import create_app

    ports = [free_port(), free_port()]
    procs = []
    base = service_settings.model_copy(update={"online_shards": 2})
    try:
        for shard, port in enumerate(ports):
            env = settings_env(base.model_copy(update={"online_shard": shard}))
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "uvicorn", "api.online:app", "--port", str(port), "--log-level", "warning"],
                    cwd=ROOT,
                    env=env,
                )
            )
        for port in ports:
            wait_for(lambda p=port: _ok(f"http://127.0.0.1:{p}/healthz"), 30, "an online owner")
        urls = ",".join(f"http://127.0.0.1:{p}" for p in ports)
        api_settings = base.model_copy(update={"online_urls": urls, "sweep_interval_s": 0})
        with TestClient(create_app(api_settings, enqueue=lambda *a: None)) as api:
            assert api.post("/v1/online/groups", json=group("proxied", 0, capacity_gb=[1.0])).status_code in (201, 409)
            names = [f"node-{n}" for n in range(6)]
            for name in names:
                assert api.post("/v1/online/instances", json=instance(name, 4, group="proxied")).status_code == 201, (
                    name
                )
                for _ in range(2):
                    r = api.post(f"/v1/online/instances/{name}/trace-queries", json={"block_keys": [3, 4]})
                    assert r.status_code == 200, r.text
            assert {shard_of(n, 2) for n in names} == {0, 1}
            listed = api.get("/v1/online/instances").json()["items"]
            assert [i["instance_id"] for i in listed] == names
            assert {i["shard"] for i in listed} == {0, 1} and all(i["total_hit_blocks"] == [2] for i in listed)
            assert api.get("/v1/online/instances/ghost").status_code == 404
            assert (
                api.post(
                    "/v1/online/instances/node-0/trace-queries", json={"block_keys": [1], "input_token_len": 1}
                ).status_code
                == 422
            )
        with TestClient(
            create_app(base.model_copy(update={"sweep_interval_s": 0}), enqueue=lambda *a: None)
        ) as unconfigured:
            r = unconfigured.get("/v1/online/instances")
            assert r.status_code == 503 and r.json()["error"]["code"] == "online_not_configured"
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)


def _ok(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=1).json().get("status") == "ok"
    except (httpx.HTTPError, ValueError):
        return False


def test_ttl_groups_reject_timestamps_that_go_backwards(owner: TestClient) -> None:
    """A TTL group ages blocks by the requests' timestamps; like an unsorted offline trace, a
    timestamp before the previous one is rejected (422 naming it) and nothing is applied."""
    register(owner, ttl=30)
    s = 10**9
    url = "/v1/online/instances/i1/trace-queries"
    assert owner.post(url, json={"block_keys": [1, 2], "timestamp_ns": 100 * s}).status_code == 200
    assert owner.post(url, json={"block_keys": [1, 2], "timestamp_ns": 100 * s}).status_code == 200  # ties are fine
    before = owner.get("/v1/online/instances/i1").json()
    r = owner.post(url, json={"block_keys": [1, 2], "timestamp_ns": 99 * s})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["details"][0]["loc"] == ["body", "timestamp_ns"]
    assert f"timestamp_ns {99 * s} is before the previous request's {100 * s}" in err["message"]
    r = owner.post(
        url + "/batch",
        json={"requests": [{"block_keys": [3], "timestamp_ns": 120 * s}, {"block_keys": [3], "timestamp_ns": 110 * s}]},
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "requests", 1, "timestamp_ns"]
    assert "nothing was applied" in r.json()["error"]["message"]
    after = owner.get("/v1/online/instances/i1").json()
    assert (
        (after["total_queries"], after["unique_blocks"]) == (before["total_queries"], before["unique_blocks"]) == (2, 2)
    )
    r = owner.post(url + "/batch", json={"requests": [{"block_keys": [1, 2], "timestamp_ns": 120 * s}]})
    assert r.status_code == 200 and r.json()["results"][0]["hit_blocks"] == [2, 2, 2]  # still alive at +20 s of 30


def test_groups_without_ttl_ignore_the_order_of_timestamps(owner: TestClient) -> None:
    register(owner)
    url = "/v1/online/instances/i1/trace-queries"
    assert owner.post(url, json={"block_keys": [1], "timestamp_ns": 10**12}).status_code == 200
    r = owner.post(url, json={"block_keys": [1], "timestamp_ns": 1})
    assert r.status_code == 200 and r.json()["hit_blocks"] == [1, 1, 1]
