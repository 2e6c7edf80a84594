"""Policy sweeps over HTTP, on real Celery worker processes: one task per simulation, results in
SQL, and policies.json byte-identical to `litehit policies -o` on the same config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from test_cli_policies import qwen_trace
from test_service_api import upload, wait_job

from litehit.cli import main

pytestmark = pytest.mark.service

SWEEP = {
    "policies": ["lru", "fifo", "lfu", "gdfs", "wa"],
    "capacity_gb": [3 * 16384 / 2**30, 12 * 16384 / 2**30, 40 * 16384 / 2**30],
    "wa_refit_seconds": 120.0,
    "wa_fit_window_seconds": 900.0,
    "verify_lru": True,
}
CONFIG: dict[str, Any] = {
    "block_size": 16,
    "trace_format": "qwen_bailian",
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g", "enable_prefix_hash": False}],
    "instances": [
        instance("b16", 16, group="g", sizes=(16384,)),
        instance("b32", 32, group="g", sizes=(32768,)),
    ],
}


def test_a_sweep_over_http_equals_the_cli(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=3)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    r = api.post("/v1/policy-sweeps", json={**CONFIG, "trace_id": uploaded["id"], "sweep": SWEEP})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/policy-sweeps/{r.json()['id']}"
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    assert job["kind"] == "policy_sweep" and job["stage"] == "done"
    # the CLI on the same config
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({**CONFIG, "trace_file_path": str(trace), "output_result_path": str(tmp_path)}))
    cli_json = tmp_path / "cli.json"
    args = ["policies", str(config_file), "--capacity-gb", *map(str, SWEEP["capacity_gb"]), "--verify-lru"]
    args += ["--wa-refit-seconds", "120", "--wa-fit-window-seconds", "900", "-o", str(cli_json)]
    assert main(args) == 0
    capsys.readouterr()
    served = api.get(job["links"]["result"])
    assert served.status_code == 200
    assert served.content == cli_json.read_bytes()
    result = json.loads(served.content)
    # one SQL row per lane x policy x capacity, each equal to the JSON
    runs = job["runs"]
    assert len(runs) == 2 * 5 * 3
    assert all(r["worker"] and r["state"] == "succeeded" for r in runs)
    by_lane = {lane["lane"]: lane for lane in result["lanes"]}
    for row in runs:
        lane = by_lane[row["instance_id"]]
        (match,) = [
            x for x in lane["results"] if x["policy"] == row["policy"] and x["capacity_gb"] == row["capacity_gb"]
        ]
        assert (row["hit_blocks"], row["hit_tokens"], row["hit_ratio"]) == (
            match["hit_blocks"],
            match["hit_tokens"],
            match["hit_ratio"],
        )
        assert row["slot"] == SWEEP["capacity_gb"].index(row["capacity_gb"])
    for lane in result["lanes"]:
        assert lane["lru_check"]["equal"] == lane["lru_check"]["comparisons"] > 0
        assert lane["wa"]["fits"] > 10
    plot = api.get(job["links"]["plot"])
    assert plot.status_code == 200 and plot.content[:8] == b"\x89PNG\r\n\x1a\n"
    listed = api.get("/v1/policy-sweeps?limit=5").json()
    assert job["id"] in [item["id"] for item in listed["items"]]


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        ({"sweep": {**SWEEP, "policies": ["lru", "mru"]}}, ["body", "sweep", "policies", 1]),
        ({"sweep": {**SWEEP, "capacity_gb": [0]}}, ["body", "sweep", "capacity_gb", 0]),
        ({"sweep": {**SWEEP, "wa_refit_seconds": -1}}, ["body", "sweep", "wa_refit_seconds"]),
        ({"sweep": {"policies": ["lru"]}}, ["body", "sweep", "capacity_gb"]),
        ({"instance_groups": [{"name": "g", "ttl_seconds": 60}]}, ["body", "instances", 0]),
    ],
)
def test_bad_sweeps_get_422_naming_the_field(api: Any, tmp_path: Path, patch: dict[str, Any], loc: list[Any]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=4)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    r = api.post("/v1/policy-sweeps", json={**CONFIG, "trace_id": uploaded["id"], "sweep": SWEEP, **patch})
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(d["loc"][: len(loc)] == loc for d in details), details


def test_results_of_an_unfinished_or_unknown_sweep(api: Any) -> None:
    assert api.get("/v1/policy-sweeps/" + "0" * 32).status_code == 404
    assert api.get("/v1/policy-sweeps/" + "0" * 32 + "/result.json").status_code == 404
