"""The replay shorthand over HTTP (a trace plus block sizes, TTLs and KV bytes, as on the command
line) on every job that takes a replay config: the expanded config is the CLI's, so facts and
profile.json are byte-identical to `litehit replay` / `litehit profile` with the same flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_policies import qwen_trace
from test_service_api import upload, wait_job

from litehit.cli import main

pytestmark = pytest.mark.service

SHORTHAND = {"block_sizes": [16, 32], "ttl_seconds": [0, 60], "model": "Qwen2.5-7B", "kv_dtype": "fp8"}
FLAGS = ["--block-sizes", "16,32", "--ttl-seconds", "0,60", "--model", "Qwen2.5-7B", "--kv-dtype", "fp8"]


def test_a_shorthand_replay_and_profile_equal_the_cli(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=11)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    replay = api.post("/v1/replays", json={"trace_id": uploaded["id"], **SHORTHAND})
    profile = api.post("/v1/profiles", json={"trace_id": uploaded["id"], **SHORTHAND})
    assert replay.status_code == 202, replay.text
    assert profile.status_code == 202, profile.text
    replay_job = wait_job(api, replay.headers["location"])
    profile_job = wait_job(api, profile.headers["location"])
    assert replay_job["state"] == "succeeded", replay_job["error"]
    assert profile_job["state"] == "succeeded", profile_job["error"]
    config = replay_job["spec"]
    assert config["trace_format"] == "qwen_bailian" and config["block_size"] == 16
    assert [i["instance_id"] for i in config["instances"]] == ["b16", "b32", "b16_ttl60", "b32_ttl60"]
    assert config["instances"][0]["location_spec_infos"][0]["size"] == 28_672 * 16  # Qwen2.5-7B fp8 per token
    # the CLI with the same flags
    out = tmp_path / "cli"
    assert main(["replay", str(trace), *FLAGS, "-o", str(out)]) == 0
    assert main(["profile", str(trace), *FLAGS, "-o", str(tmp_path / "profile.json")]) == 0
    capsys.readouterr()
    assert api.get(replay_job["facts"]["url"]).content == (out / "litehit_facts.csv").read_bytes()
    served = api.get(profile_job["links"]["result"]).content
    assert served == (tmp_path / "profile.json").read_bytes()
    assert [lane["lane"] for lane in json.loads(served)["lanes"]] == ["b16", "b32", "b16_ttl60", "b32_ttl60"]


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        ({"block_sizes": [0]}, ["body", "block_sizes", 0]),
        ({"block_sizes": []}, ["body", "block_sizes"]),
        ({"ttl_seconds": [-1]}, ["body", "ttl_seconds", 0]),
        ({"kv_dtype": "int3"}, ["body", "kv_dtype"]),
        ({"model": "gpt-2"}, ["body", "model"]),
        ({"model": "Qwen2.5-7B", "kv_bytes_per_token": 10}, ["body", "kv_bytes_per_token"]),
        ({"kv_dtype": "fp8"}, ["body", "kv_dtype"]),
        ({"block_sizes": [16], "instances": [{"instance_id": "x"}]}, ["body", "instances"]),
        ({"block_sizes": [16], "trace_format": "bogus"}, ["body", "trace_format"]),
    ],
)
@pytest.mark.parametrize("route", ["/v1/replays", "/v1/profiles"])
def test_bad_shorthands_get_422_naming_the_field(
    api: Any, tmp_path: Path, route: str, patch: dict[str, Any], loc: list[Any]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=12)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    r = api.post(route, json={"trace_id": uploaded["id"], **patch})
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(d["loc"][: len(loc)] == loc for d in details), details


def test_a_shorthand_needs_a_trace(api: Any) -> None:
    r = api.post("/v1/replays", json={"block_sizes": [16]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["loc"][:2] == ["body", "trace_file_path"]
    r = api.post("/v1/profiles", json={"block_sizes": [16], "trace_id": "0" * 32})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["loc"][:2] == ["body", "trace_id"]


def test_a_query_takes_capacities_with_units(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=13)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    replay = wait_job(api, api.post("/v1/replays", json={"trace_id": uploaded["id"], **SHORTHAND}).headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    caps = ["20blocks", "4Ktokens", "512KiB", 0.5, "-1"]
    r = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": caps})
    assert r.status_code == 202, r.text
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    assert query["total"] is None  # four lanes of four setups (block size x TTL): a total per setup
    total = query["totals"][0]
    assert total["instances"] == ["b16"]
    assert total["capacity_gb"] == [None, None, 0.00048828125, 0.5, -1.0]
    assert total["capacities"] == ["20blocks", "4000tokens", "524288B", "0.5", "-1.0"]
    # the CLI on the same facts
    facts = tmp_path / "facts.csv"
    facts.write_bytes(api.get(replay["facts"]["url"]).content)
    assert main(["query", str(facts), "--capacity-gb", *map(str, caps), "-o", str(tmp_path / "q.jsonl")]) == 0
    capsys.readouterr()
    assert api.get(query["links"]["requests"]).content == (tmp_path / "q.jsonl").read_bytes()
    lines = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    cli_total = next(line for line in lines if line.get("summary") and line.get("instance_id") == "b16")
    assert total["total_hit_blocks"] == cli_total["total_hit_blocks"]
    bad = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": ["2GB"]})
    assert bad.status_code == 422 and "write GiB" in bad.text
