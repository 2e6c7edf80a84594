"""The live curve of an online instance: at every capacity it equals `litehit query` over an
offline replay of the same requests (and a naive LRU per capacity), its tier split equals the
offline tier split, it survives the owner's restart, /metrics shows the capacity reaching 50 /
90 / 99% of the plateau, and bad parameters get a 422 naming them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers import config, group, instance, request, write_rows
from oracle import NaiveLru

import core_c
from api.online import create_online_app
from litehit.db.migrate import upgrade
from litehit.jobs.replay import run_replay
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings
from litehit.spec import parse_replay_spec
from litehit.tiers.document import tiers_document
from litehit.tiers.lanes import load_lanes
from litehit.tiers.options import TiersOptions

BLOCK_BYTES = 16384  # the helpers' instance: 4 tokens per block, 16 KiB per block


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(home=tmp_path, online_snapshot_s=3600)
    upgrade(s.db_url)
    return s


def _register(client: TestClient, ttl: int) -> None:
    r = client.post("/v1/online/groups", json=group("g1", ttl, capacity_gb=[1.0], enable_theoretical_max_cache=True))
    assert r.status_code == 201, r.text
    r = client.post("/v1/online/instances", json=instance("i1", 4, group="g1"))
    assert r.status_code == 201, r.text


def _rows(seed: int, n: int) -> list[dict[str, Any]]:
    """Requests over a small prefix tree: shared prefixes, branches, revisits."""
    rng = random.Random(seed)
    rows, t = [], 10**9
    for i in range(n):
        t += rng.randrange(0, 3 * 10**9)
        raw = [rng.randrange(3) for _ in range(rng.randint(1, 8))]
        keys = [int(k) for k in core_c.prefix_hash(raw)]
        rows.append(request(f"r{i}", t, keys, 4 * len(raw) + rng.randrange(4)))
    return rows


def _send(client: TestClient, rows: list[dict[str, Any]]) -> None:
    for lo in range(0, len(rows), 100):
        batch = [
            {"block_keys": r["keys"], "input_token_len": r["input_len"], "timestamp_ns": r["timestamp_ns"]}
            for r in rows[lo : lo + 100]
        ]
        r = client.post("/v1/online/instances/i1/trace-queries/batch", json={"requests": batch})
        assert r.status_code == 200, r.text


def _offline(tmp_path: Path, rows: list[dict[str, Any]], ttl: int) -> Path:
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    run_replay(parse_replay_spec(config(trace, out, groups=[group(ttl_seconds=ttl)])))
    return out / "litehit_facts.csv"


@pytest.fixture
def owner(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_online_app(settings)) as client:
        yield client


@pytest.mark.parametrize("ttl", [0, 5])
def test_the_live_curve_equals_the_offline_query_at_every_capacity(owner: TestClient, tmp_path: Path, ttl: int) -> None:
    rows = _rows(7 + ttl, 400)
    _register(owner, ttl)
    _send(owner, rows)
    facts = _offline(tmp_path, rows, ttl)
    curve = owner.get("/v1/online/instances/i1/curve", params={"points": 4096}).json()
    largest = curve["breakpoints"]["rows"][-1][0]
    capacities = [f"{c}blocks" for c in range(largest + 3)] + ["inf"]
    live: dict[str, Any] = {"capacities": []}
    for lo in range(0, len(capacities), 200):  # at most 256 capacities a call
        answer = owner.get("/v1/online/instances/i1/curve", params={"capacity": capacities[lo : lo + 200]})
        assert answer.status_code == 200, answer.text[:300]
        live = {**answer.json(), "capacities": live["capacities"] + answer.json()["capacities"]}
    offline = query_facts(facts, parse_capacities(capacities)).total
    assert [a["hit_blocks"] for a in live["capacities"]] == offline.total_hit_blocks
    assert [a["hit_tokens"] for a in live["capacities"]] == offline.total_hit_tokens
    assert [a["hit_rate"] for a in live["capacities"]] == offline.hit_rates
    assert live["input_tokens"] == offline.total_input_tokens and live["queries"] == len(rows)
    # an independent naive LRU per capacity gives the same sums
    for c in (0, 1, 2, 5, largest):
        lru = NaiveLru(c, ttl * 10**9)
        expected = sum(lru.request(r["keys"], r["timestamp_ns"]) for r in rows)
        assert live["capacities"][c]["hit_blocks"] == expected
    # bytes are read as the projector reads them: floor(bytes / block bytes) blocks
    bytes_answer = owner.get("/v1/online/instances/i1/curve", params={"capacity": [f"{3 * BLOCK_BYTES + 5}B"]})
    assert bytes_answer.json()["capacities"][0]["hit_blocks"] == offline.total_hit_blocks[3]
    # the breakpoints are where the curve changes, and reproduce it
    for k, hits, _rate in curve["breakpoints"]["rows"]:
        assert live["capacities"][k]["hit_blocks"] == hits
        assert k == 0 or live["capacities"][k - 1]["hit_blocks"] < hits
    assert curve["infinite"]["hit_blocks"] == offline.total_hit_blocks[-1]


@pytest.mark.parametrize("mode", ["exclusive", "inclusive"])
def test_the_live_tier_split_equals_the_offline_split(owner: TestClient, tmp_path: Path, mode: str) -> None:
    rows = _rows(3, 300)
    _register(owner, 0)
    _send(owner, rows)
    tiers = ["hbm=2blocks", "dram=5blocks", "ssd=inf"]
    live = owner.get("/v1/online/instances/i1/curve", params={"tier": tiers, "mode": mode}).json()
    lanes = load_lanes(_offline(tmp_path, rows, 0))
    options = TiersOptions.model_validate(
        {"mode": mode, "tiers": [{"name": t.split("=")[0], "capacity": t.split("=")[1]} for t in tiers]}
    )
    (offline,) = tiers_document(lanes, options)["lanes"]
    assert [(t["name"], t["hit_blocks"], t["hit_tokens"]) for t in live["tiers"]] == [
        (t["name"], t["hit_blocks"], t["hit_tokens"]) for t in offline["tiers"]
    ]
    assert sum(t["hit_blocks"] for t in live["tiers"]) > live["tiers"][0]["hit_blocks"] > 0  # lower tiers serve too


def test_the_curve_survives_a_restart_and_shows_in_metrics(settings: Settings) -> None:
    rows = _rows(11, 200)
    with TestClient(create_online_app(settings)) as first:
        _register(first, 0)
        _send(first, rows)
        before = first.get("/v1/online/instances/i1/curve", params={"capacity": ["3blocks", "inf"]}).json()
        metrics = first.get("/metrics").text
    with TestClient(create_online_app(settings)) as second:
        after = second.get("/v1/online/instances/i1/curve", params={"capacity": ["3blocks", "inf"]}).json()
    assert after["capacities"] == before["capacities"] and after["breakpoints"] == before["breakpoints"]
    assert after["capacities"][1]["hit_blocks"] > 0
    for target in before["targets"]:
        line = f'litehit_online_capacity_for_plateau_bytes{{fraction="{target["fraction"]}",group="g1",instance="i1"}} '
        value = next(row for row in metrics.splitlines() if row.startswith(line)).split()[-1]
        assert float(value) == target["capacity_bytes"]
        # the smallest such capacity: one block less falls short of the fraction
        plateau = before["capacities"][1]["hit_blocks"]
        assert target["hit_blocks"] >= target["fraction"] * plateau


def test_bad_curve_parameters_are_refused_naming_them(owner: TestClient) -> None:
    _register(owner, 0)
    for params, where in (
        ({"capacity": ["-3GiB"]}, "capacity[0]"),
        ({"capacity": ["4 parsecs"]}, "capacity[0]"),
        ({"tier": ["hbm"]}, "tier[0]"),
        ({"tier": ["hbm=inf", "dram=1GiB"]}, "tier"),
        ({"tier": ["hbm=1GiB", "hbm=2GiB"]}, "tier"),
    ):
        r = owner.get("/v1/online/instances/i1/curve", params=params)
        assert r.status_code == 422, (params, r.text)
        assert where in r.text, (params, r.text)
    r = owner.get("/v1/online/instances/i1/curve", params={"mode": "sideways"})
    assert r.status_code == 422 and "mode" in r.text
    assert owner.get("/v1/online/instances/nope/curve").status_code == 404
