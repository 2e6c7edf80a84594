"""Hybrid lanes over HTTP on real workers: ``POST /v1/replays`` with a hybrid instance publishes the
same bytes: rows as ``litehit replay`` (HYBRID_G5.md 5.5 #19), a query job over them answers byte
capacities with the CLI's numbers, a tier split and a plan job in bytes equal the CLI's, and a block
capacity fails either job with one line naming the lane (no 500)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config, hybrid_instance, write_rows
from test_service_api import upload, wait_job

from litehit.cli import main

pytestmark = pytest.mark.service

ROWS = [
    {"type": "request", "instance_id": "m1", "trace_id": f"r{i}", "timestamp_ns": 1000 * i, "keys": [1, 2, 3, 4],
     "input_len": 17}
    for i in (1, 2)
]  # fmt: skip
CONFIG: dict[str, Any] = {
    "block_size": 4,
    "trace_format": "standard",
    "instance_groups": [{"name": "g1", "capacity_gb": [1.0], "eviction_policy": "lru", "ttl_seconds": 0}],
    "instances": [hybrid_instance("m1")],
}
FACTS = (
    b"trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve\n"
    b'r1,m1,1000,17,4,16384,"bytes:[]"\n'
    b'r2,m1,2000,17,4,16384,"bytes:[[53248,3],[73728,4]]"\n'
)


def test_a_hybrid_replay_and_its_query_over_http(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_rows(tmp_path / "t.jsonl", ROWS)
    uploaded = upload(api, trace.read_bytes(), "hybrid.jsonl")
    r = api.post("/v1/replays", json={**CONFIG, "trace_id": uploaded["id"]})
    assert r.status_code == 202, r.text
    replay = wait_job(api, r.headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    served = api.get(replay["facts"]["url"])
    assert served.status_code == 200 and served.content == FACTS
    local = tmp_path / "config.json"
    local.write_text(json.dumps(config(trace, tmp_path / "cli", **CONFIG)))
    assert main(["replay", str(local)]) == 0, capsys.readouterr().err
    assert (tmp_path / "cli" / "litehit_facts.csv").read_bytes() == FACTS
    caps = [str(53248 / 2**30), "-1"]
    r = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": caps})
    assert r.status_code == 202, r.text
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    (lane,) = query["instances"]
    assert lane["instance_id"] == "m1" and lane["total_hit_blocks"] == [3, 4] and lane["total_input_tokens"] == 34
    r = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": ["10blocks"]})
    assert r.status_code in (202, 422), r.text
    if r.status_code == 202:
        failed = wait_job(api, r.headers["location"])
        assert failed["state"] == "failed"
        assert "instance m1 is a hybrid lane" in failed["error"] and "\n" not in failed["error"]
    # the tier split in bytes: HBM 53248 B restores 3 blocks of r2, a DRAM of 20480 B more the 4th
    tiers = [{"name": "hbm", "capacity": "53248B"}, {"name": "dram", "capacity": "20480B"}]
    r = api.post("/v1/tiers", json={"replay_id": replay["id"], "tiers": tiers})
    assert r.status_code == 202, r.text
    split = wait_job(api, r.headers["location"])
    assert split["state"] == "succeeded", split["error"]
    served = api.get(f"/v1/tiers/{split['id']}/result")
    out = tmp_path / "tiers.json"
    assert main(["tiers", str(tmp_path / "cli" / "litehit_facts.csv"), "--tier", "hbm=53248B", "--tier",
                 "dram=20480B", "--config", str(local), "-o", str(out)]) == 0  # fmt: skip
    assert served.content == out.read_bytes()
    (lane,) = json.loads(served.content)["lanes"]
    assert lane["hybrid"] and [t["hit_blocks"] for t in lane["tiers"]] == [3, 1]
    (view,) = split["lanes"]
    assert [t["hit_blocks"] for t in view["tiers"]] == [3, 1]  # the SQL summary rows
    # the plan in bytes: a fixed 16 KiB HBM, the cheapest DRAM reaching 30% (3 blocks at 53248 B)
    plan_tiers = [
        {"name": "hbm", "capacity": "16KiB", "price_per_gib_hour": 4.0},
        {"name": "dram", "capacity": "0..1GiB", "price_per_gib_hour": 1.0},
    ]
    r = api.post("/v1/plans", json={"replay_id": replay["id"], "tiers": plan_tiers, "target": {"hit_rate": 0.3}})
    assert r.status_code == 202, r.text
    plan = wait_job(api, r.headers["location"])
    assert plan["state"] == "succeeded", plan["error"]
    doc = json.loads(api.get(f"/v1/plans/{plan['id']}/result").content)
    assert [t["capacity_bytes"] for t in doc["best"]["tiers"]] == [16384, 36864]
    (lane_plan,) = plan["lanes"]
    assert lane_plan["best"]["total_capacity_blocks"] is None  # the SQL rows of a hybrid lane's plan
    assert [t["capacity_bytes"] for t in lane_plan["best"]["tiers"]] == [16384, 36864]
    r = api.post("/v1/tiers", json={"replay_id": replay["id"], "tiers": [{"name": "hbm", "capacity": "4blocks"}]})
    assert r.status_code in (202, 422), r.text
    if r.status_code == 202:
        failed = wait_job(api, r.headers["location"])
        assert failed["state"] == "failed" and "m1 is hybrid" in failed["error"] and "\n" not in failed["error"]


def test_the_shorthand_makes_hybrid_lanes_over_http(api: Any, tmp_path: Path) -> None:
    trace = write_rows(tmp_path / "t.jsonl", ROWS)
    uploaded = upload(api, trace.read_bytes(), "hybrid.jsonl")
    body = {"trace_id": uploaded["id"], "trace_format": "standard", "block_size": 4, "block_bytes": 16384,
            "linear_step": 12, "linear_state_bytes": 4096}  # fmt: skip
    r = api.post("/v1/replays", json=body)
    assert r.status_code == 202, r.text
    replay = wait_job(api, r.headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    assert api.get(replay["facts"]["url"]).content == FACTS.replace(b",m1,", b",b4,")
    bad = api.post("/v1/replays", json={**body, "linear_step": 6})
    assert bad.status_code == 422, bad.text
    assert any("linear_step" in str(d["loc"]) and "multiple" in d["msg"] for d in bad.json()["error"]["details"])


def test_a_hybrid_model_preset_over_http_equals_the_cli(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shorthand's model field with a hybrid preset (Qwen3-Next: 24,576 B/token of KV, a
    39,518,208-byte state per block) gives the facts of the CLI's explicit hybrid flags."""
    trace = write_rows(tmp_path / "t.jsonl", ROWS)
    uploaded = upload(api, trace.read_bytes(), "hybrid.jsonl")
    body = {"trace_id": uploaded["id"], "trace_format": "standard", "block_size": 4, "model": "Qwen3-Next-80B-A3B"}
    r = api.post("/v1/replays", json=body)
    assert r.status_code == 202, r.text
    replay = wait_job(api, r.headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    flags = ["--kv-bytes-per-token", "24576", "--linear-step", "4", "--linear-state-bytes", "39518208"]
    assert (
        main(["replay", str(trace), "--format", "standard", "--block-size", "4", *flags, "-o", str(tmp_path / "c")])
        == 0
    )
    capsys.readouterr()
    served = api.get(replay["facts"]["url"]).content
    assert served == (tmp_path / "c" / "litehit_facts.csv").read_bytes() and b'"bytes:' in served
    bad = api.post("/v1/replays", json={**body, "linear_state_bytes": 4096})
    assert bad.status_code == 422, bad.text
    assert any(
        "linear_state_bytes" in str(d["loc"]) and "cannot be combined" in d["msg"]
        for d in bad.json()["error"]["details"]
    )
