"""Online mode on hybrid instances (HYBRID_G5.md section 6.3): registration with the G5 rules,
trace queries projected at each slot's total bytes, ListInstances' resident bytes, the live curve
on the byte axis, all against the naive list model (tests/support/hybrid_oracle.py), golden #19,
reconciliation with an offline replay + query, and a restart."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers import config, group, hybrid_instance, request, write_rows
from hybrid_oracle import NaiveHybrid, project_bytes, project_infinite

import core_c
from api.online import create_online_app
from litehit.db.migrate import upgrade
from litehit.jobs.replay import run_replay
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings
from litehit.spec import parse_replay_spec

GIB = 1 << 30
FULL, LINEAR = 16384, 4096  # hybrid_instance(): 2 x 8192 Full, 2 x 2048 Linear, block 4 tokens


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
    client: TestClient, caps: list[float], *, ttl: int = 0, step: int = 12, name: str = "m1"
) -> dict[str, Any]:
    r = client.post("/v1/online/groups", json=group("g1", ttl, capacity_gb=caps, enable_theoretical_max_cache=True))
    assert r.status_code in (201, 409), r.text
    r = client.post("/v1/online/instances", json=hybrid_instance(name, linear_step=step))
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def query(client: TestClient, keys: list[int], **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/online/instances/m1/trace-queries", json={"block_keys": keys, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_golden_19_online(owner: TestClient) -> None:
    """5.5 #19: capacity 53248 B, theoretical max on: the 1st query hits 0, the 2nd 3 (max 4)."""
    view = register(owner, [53248 / GIB])
    assert view["capacity_bytes"] == [53248] and view["capacity_blocks"] == [None]
    assert view["linear_step"] == 12 and view["linear_charge_bytes"] == LINEAR and view["block_bytes"] == FULL
    assert view["estimated_capacity_blocks"] == [53248 * 3 // (3 * FULL + LINEAR)]
    first = query(owner, [1, 2, 3, 4], input_token_len=17)
    assert first["hit_blocks"] == [0] and first["max_hit_blocks"] == 0
    second = query(owner, [1, 2, 3, 4], input_token_len=17)
    assert second["hit_blocks"] == [3] and second["max_hit_blocks"] == 4
    assert second["hit_rates"] == [3 * 4 / 17]
    listed = owner.get("/v1/online/instances").json()["items"][0]
    assert listed["total_hit_blocks"] == [3] and listed["max_hit_blocks"] == 4
    assert listed["total_input_tokens"] == 34
    # resident: F1..F4 and the states at positions 2 (the step) and 3 (the tail)
    assert listed["unique_blocks"] == 4 and listed["resident_linear_states"] == 2
    assert listed["kv_cache_usage_bytes"] == 4 * FULL + 2 * LINEAR
    assert listed["bytes_per_block"] == (4 * FULL + 2 * LINEAR) // 4
    curve = owner.get(
        "/v1/online/instances/m1/curve", params={"capacity": ["53247B", "53248B", "73728B", "inf"]}
    ).json()
    assert curve["capacity_unit"] == "bytes"
    assert [c["hit_blocks"] for c in curve["capacities"]] == [0, 3, 4, 4]
    assert curve["capacities"][1]["capacity_bytes"] == 53248 and curve["capacities"][1]["capacity_blocks"] is None
    assert curve["breakpoints"]["columns"][0] == "capacity_bytes"
    assert [r[:2] for r in curve["breakpoints"]["rows"]] == [[0, 0], [53248, 3], [73728, 4]]
    assert [t["capacity_bytes"] for t in curve["targets"]] == [53248, 73728, 73728]


def test_blocks_capacities_on_a_hybrid_instance_are_refused(owner: TestClient) -> None:
    register(owner, [1.0])
    query(owner, [1, 2, 3])
    for capacity in ("20000blocks", "1Mtokens"):
        r = owner.get("/v1/online/instances/m1/curve", params={"capacity": [capacity]})
        assert r.status_code == 422, r.text
        assert "m1 is hybrid" in r.json()["error"]["message"] and "bytes" in r.json()["error"]["message"]
    r = owner.get("/v1/online/instances/m1/curve", params={"tier": ["hbm=100blocks", "dram=inf"]})
    assert r.status_code == 422


@pytest.mark.parametrize(
    ("mutate", "field", "needle"),
    [
        (lambda i: i.update(linear_step=10), "linear_step", "not a multiple of block_size=4"),
        (lambda i: i.update(linear_step=-4), "linear_step", "negative"),
        (
            lambda i: i["optimizer_state_info"].update(linear_location_spec_group_name=""),
            "optimizer_state_info.linear_location_spec_group_name",
            "requires a non-empty Mamba spec group",
        ),
        (lambda i: i.update(linear_step=0), "optimizer_state_info.linear_location_spec_group_name", "must not"),
    ],
)
def test_registration_refuses_bad_hybrid_instances(owner: TestClient, mutate: Any, field: str, needle: str) -> None:
    assert owner.post("/v1/online/groups", json=group("g1", 0, capacity_gb=[1.0])).status_code == 201
    body = hybrid_instance("m1")
    mutate(body)
    r = owner.post("/v1/online/instances", json=body)
    assert r.status_code == 422, r.text
    text = json.dumps(r.json())
    assert field in text and needle in text
    assert owner.get("/v1/online/instances").json()["items"] == []


def tree_requests(seed: int, n: int) -> list[tuple[list[int], int, int]]:
    """(prefix-chained keys, input_len, timestamp_ns) over a small prefix tree with revisits."""
    rng = random.Random(seed)
    out, t = [], 10**9
    for _ in range(n):
        t += rng.randrange(0, 3 * 10**9)
        raw = [rng.randrange(3) for _ in range(rng.randint(1, 9))]
        keys = [int(k) for k in core_c.prefix_hash(raw)]
        out.append((keys, 4 * len(keys) + rng.randrange(4), t))
    return out


@pytest.mark.parametrize(("step", "ttl"), [(4, 0), (12, 0), (8, 20)])
def test_online_equals_the_naive_model_at_every_slot_and_any_capacity(owner: TestClient, step: int, ttl: int) -> None:
    rng = random.Random(step * 100 + ttl)
    slots = sorted({rng.randrange(0, 40) * 4096 for _ in range(5)} | {0, 10 * GIB})
    register(owner, [s / GIB for s in slots], ttl=ttl, step=step)
    naive = NaiveHybrid(FULL, LINEAR, step // 4, ttl * 10**9)
    requests = tree_requests(step + ttl, 400)
    points: list[list[tuple[int, int]]] = []
    for lo in range(0, len(requests), 50):
        chunk = requests[lo : lo + 50]
        body = {"requests": [{"block_keys": k, "input_token_len": n, "timestamp_ns": t} for k, n, t in chunk]}
        r = owner.post("/v1/online/instances/m1/trace-queries/batch", json=body)
        assert r.status_code == 200, r.text
        for (keys, _n, t), got in zip(chunk, r.json()["results"], strict=True):
            fact = naive.process(keys, t)
            points.append(fact)
            assert got["hit_blocks"] == [project_bytes(fact, s) for s in slots]
            assert got["max_hit_blocks"] == project_infinite(fact)
        view = owner.get("/v1/online/instances/m1").json()
        assert view["unique_blocks"] == naive.pool.full_count()
        assert view["resident_linear_states"] == naive.pool.linear_count()
        assert view["kv_cache_usage_bytes"] == naive.pool.resident_bytes()
    assert view["total_hit_blocks"] == [sum(project_bytes(p, s) for p in points) for s in slots]
    thresholds = sorted({c for p in points for c, _ in p})
    asked = sorted({0, *thresholds, *(c - 1 for c in thresholds), *(c + 1 for c in thresholds[:40])})[:200]
    curve = owner.get(
        "/v1/online/instances/m1/curve", params={"capacity": [f"{c}B" for c in asked] + ["inf"], "points": 4096}
    ).json()
    assert [c["hit_blocks"] for c in curve["capacities"]] == [
        *(sum(project_bytes(p, c) for p in points) for c in asked),
        sum(project_infinite(p) for p in points),
    ]
    rows = curve["breakpoints"]["rows"]
    assert [r[0] for r in rows] == [0, *thresholds]
    assert all(r[1] == sum(project_bytes(p, r[0]) for p in points) for r in rows)


def test_online_hybrid_reconciles_with_offline_replay_and_query(owner: TestClient, tmp_path: Path) -> None:
    caps = [3 * 16384 / GIB, 200 * 1024 / GIB, 1.0]
    register(owner, caps, ttl=30)
    rows, results = [], []
    for i, (keys, n, t) in enumerate(tree_requests(5, 300)):
        rows.append(request(f"r{i}", t, keys, n, inst="m1"))
    for lo in range(0, len(rows), 100):
        batch = [
            {"block_keys": r["keys"], "input_token_len": r["input_len"], "timestamp_ns": r["timestamp_ns"]}
            for r in rows[lo : lo + 100]
        ]
        results += owner.post("/v1/online/instances/m1/trace-queries/batch", json={"requests": batch}).json()["results"]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir()
    cfg = config(trace, out, groups=[group(ttl_seconds=30)], instances=[hybrid_instance("m1")])
    run_replay(parse_replay_spec(cfg))
    buf = io.BytesIO()
    summary = query_facts(out / "litehit_facts.csv", parse_capacities([repr(c) for c in sorted(caps)] + ["-1"]), buf)
    offline = [json.loads(line) for line in buf.getvalue().splitlines()[: len(rows)]]
    assert [r["hit_blocks"] + [r["max_hit_blocks"]] for r in results] == [o["hit_blocks"] for o in offline]
    online = owner.get("/v1/online/instances/m1").json()
    assert online["total_hit_blocks"] + [online["max_hit_blocks"]] == summary.total.total_hit_blocks
    assert online["hit_rates"] + [online["max_hit_rate"]] == summary.total.hit_rates


def test_hybrid_counters_and_curve_survive_a_restart(settings: Settings) -> None:
    with TestClient(create_online_app(settings)) as first:
        register(first, [53248 / GIB])
        query(first, [1, 2, 3, 4])
        query(first, [1, 2, 3, 4])
        before = first.get("/v1/online/instances/m1/curve", params={"capacity": ["53248B"]}).json()
    with TestClient(create_online_app(settings)) as second:
        view = second.get("/v1/online/instances/m1").json()
        assert view["total_hit_blocks"] == [3] and view["unique_blocks"] == 0  # the state starts empty
        after = second.get("/v1/online/instances/m1/curve", params={"capacity": ["53248B"]}).json()
        assert after["capacities"] == before["capacities"] and after["breakpoints"] == before["breakpoints"]
        assert query(second, [1, 2, 3, 4])["hit_blocks"] == [0]  # cold again after the restart
        metrics = second.get("/metrics").text
        assert 'litehit_online_capacity_for_plateau_bytes{fraction="0.5",group="g1",instance="m1"} 53248.0' in metrics


def test_huge_slots_saturate_at_int64_max_as_the_original(owner: TestClient) -> None:
    view = register(owner, [float(2**40), 1.0])
    assert view["capacity_bytes"] == [GIB, 2**63 - 1]
    query(owner, [1, 2, 3, 4])
    assert query(owner, [1, 2, 3, 4])["hit_blocks"] == [4, 4]
