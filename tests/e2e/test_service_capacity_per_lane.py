"""Policy sweeps and window sizings over HTTP at capacities per lane (``Nblocks``, ``Ntokens``):
policies.json and window.json byte-identical to the CLI, SQL rows naming each lane's blocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_policies import qwen_trace
from test_service_api import upload, wait_job
from test_service_policies import CONFIG

from litehit.cli import main

pytestmark = pytest.mark.service

CAPS = ["12blocks", "640tokens", 3 * 16384 / 2**30]


def _config_file(tmp_path: Path, trace: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "trace_file_path": str(trace), "output_result_path": str(tmp_path)}))
    return path


def test_a_sweep_at_blocks_and_tokens_over_http_equals_the_cli(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=6)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    sweep = {"policies": ["lru", "fifo"], "capacity_gb": CAPS, "verify_lru": True}
    r = api.post("/v1/policy-sweeps", json={**CONFIG, "trace_id": uploaded["id"], "sweep": sweep})
    assert r.status_code == 202, r.text
    assert r.json()["spec"]["sweep"]["capacity_gb"] == ["12blocks", "640tokens", CAPS[2]]
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    cli_json = tmp_path / "cli.json"
    args = ["policies", str(_config_file(tmp_path, trace)), "--capacity", *map(str, CAPS), "--policies", "lru,fifo"]
    assert main([*args, "--verify-lru", "-o", str(cli_json)]) == 0
    capsys.readouterr()
    served = api.get(job["links"]["result"]).content
    assert served == cli_json.read_bytes()
    blocks = {("b16", 0): 12, ("b16", 1): 40, ("b16", 2): 3, ("b32", 0): 12, ("b32", 1): 20, ("b32", 2): 1}
    assert sorted((row["instance_id"], row["slot"], row["capacity_blocks"]) for row in job["runs"]) == sorted(
        (lane, slot, n) for (lane, slot), n in blocks.items() for _ in ("lru", "fifo")
    )
    for lane in json.loads(served)["lanes"]:
        assert [r.get("capacity") for r in lane["results"] if r["policy"] == "lru"] == ["12blocks", "640tokens", None]
        assert lane["lru_check"]["equal"] == lane["lru_check"]["comparisons"] > 0


def test_a_window_at_blocks_over_http_equals_the_cli(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=7)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    window = {"capacity_gb": "1Ktokens", "policy": "lru", "coverage": 0.9}
    r = api.post("/v1/windows", json={**CONFIG, "trace_id": uploaded["id"], "window": window})
    assert r.status_code == 202, r.text
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    cli_json = tmp_path / "cli.json"
    args = ["window", str(_config_file(tmp_path, trace)), "--capacity", "1000tokens", "--coverage", "0.9"]
    assert main([*args, "-o", str(cli_json)]) == 0
    capsys.readouterr()
    assert api.get(job["links"]["result"]).content == cli_json.read_bytes()
    assert [(row["instance_id"], row["capacity_blocks"]) for row in job["lanes"]] == [("b16", 62), ("b32", 31)]
    bad = api.post("/v1/windows", json={**CONFIG, "trace_id": uploaded["id"], "window": {"capacity_gb": "0blocks"}})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["details"][0]["loc"][:3] == ["body", "window", "capacity_gb"]
