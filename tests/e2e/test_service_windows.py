"""Window sizings over HTTP, on real Celery worker processes: one task per lane, one SQL row per
lane, and window.json byte-identical to `litehit window -o` on the same config."""

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

WINDOW = {"capacity_gb": 12 * 16384 / 2**30, "policy": "lru", "coverage": 0.9, "bucket_seconds": 5.0}


def test_a_window_sizing_over_http_equals_the_cli(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=5)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    body = {**CONFIG, "trace_id": uploaded["id"], "window": WINDOW}
    r = api.post("/v1/windows", json=body, headers={"Idempotency-Key": "window-1"})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/windows/{r.json()['id']}"
    again = api.post("/v1/windows", json=body, headers={"Idempotency-Key": "window-1"})
    assert again.status_code == 200 and again.json()["id"] == r.json()["id"]
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    assert job["kind"] == "window" and job["stage"] == "done"
    # the CLI on the same config
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({**CONFIG, "trace_file_path": str(trace), "output_result_path": str(tmp_path)}))
    cli_json = tmp_path / "cli.json"
    args = ["window", str(config_file), "--capacity-gb", str(WINDOW["capacity_gb"]), "--coverage", "0.9"]
    args += ["--bucket-seconds", "5", "-o", str(cli_json)]
    assert main(args) == 0
    capsys.readouterr()
    served = api.get(job["links"]["result"])
    assert served.status_code == 200
    assert served.content == cli_json.read_bytes()
    result = json.loads(served.content)
    # one SQL row per lane, each equal to the JSON
    lanes = job["lanes"]
    assert [row["instance_id"] for row in lanes] == ["b16", "b32"] == [lane["lane"] for lane in result["lanes"]]
    for row, lane in zip(lanes, result["lanes"], strict=True):
        assert row["state"] == "succeeded" and row["worker"]
        d = lane["delay_s"]
        assert (row["evicted"], row["no_match"]) == (lane["outcomes"]["evicted"], lane["outcomes"]["no_match"])
        assert row["delay_count"] == d["count"] > 0
        assert (row["delay_p50"], row["delay_p90"], row["delay_p99"], row["delay_p999"], row["delay_max"]) == (
            d["p50"],
            d["p90"],
            d["p99"],
            d["p999"],
            d["max"],
        )
        assert (row["requests"], row["evictions"], row["capacity_blocks"]) == (
            lane["requests"],
            lane["evictions"],
            lane["capacity_blocks"],
        )
        assert (row["window_s"], row["peak_evictions_per_s"], row["memory_bytes"]) == (
            lane["window_s"],
            lane["peak_evictions_per_s"],
            lane["memory_bytes"],
        )
    total = result["overall"]["outcomes"]
    assert total["evicted"] == sum(row["evicted"] for row in lanes)
    assert result["overall"]["delay_s"]["count"] == sum(row["delay_count"] for row in lanes)
    plot = api.get(job["links"]["plot"])
    assert plot.status_code == 200 and plot.content[:8] == b"\x89PNG\r\n\x1a\n"
    listed = api.get("/v1/windows?limit=5").json()
    assert job["id"] in [item["id"] for item in listed["items"]]
    assert api.delete(f"/v1/windows/{job['id']}").status_code == 409  # it already ended


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        ({"window": {**WINDOW, "coverage": 1.5}}, ["body", "window", "coverage"]),
        ({"window": {**WINDOW, "coverage": 0}}, ["body", "window", "coverage"]),
        ({"window": {**WINDOW, "policy": "mru"}}, ["body", "window", "policy"]),
        ({"window": {"policy": "lru"}}, ["body", "window", "capacity_gb"]),
        ({"instance_groups": [{"name": "g", "ttl_seconds": 60}]}, ["body", "instances", 0]),
    ],
)
def test_bad_window_sizings_get_422_naming_the_field(
    api: Any, tmp_path: Path, patch: dict[str, Any], loc: list[Any]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=6)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    r = api.post("/v1/windows", json={**CONFIG, "trace_id": uploaded["id"], "window": WINDOW, **patch})
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(d["loc"][: len(loc)] == loc for d in details), details


def test_unknown_window_sizings_are_404(api: Any) -> None:
    unknown = "/v1/windows/" + "0" * 32
    for path in (unknown, f"{unknown}/window.json", f"{unknown}/plot.png"):
        assert api.get(path).status_code == 404
    assert api.delete(unknown).status_code == 404
