"""Workload profiles over HTTP, on real Celery worker processes: one task per lane (a TTL lane
included), summary rows per lane x category in SQL, the plots, and profile.json byte-identical to
`litehit profile -o` on the same config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from test_cli_policies import qwen_trace
from test_service_api import upload, wait_job

from litehit.cli import main
from litehit.profile.plot import PLOT_NAMES

pytestmark = pytest.mark.service

CONFIG: dict[str, Any] = {
    "block_size": 16,
    "trace_format": "qwen_bailian",
    "fanout_all_instances": True,
    "instance_groups": [
        {"name": "g", "enable_prefix_hash": False},
        {"name": "t60", "enable_prefix_hash": False, "ttl_seconds": 60},
    ],
    "instances": [
        instance("b16", 16, group="g", sizes=(16384,)),
        instance("b32", 32, group="g", sizes=(32768,)),
        instance("b16-ttl60", 16, group="t60", sizes=(16384,)),
    ],
}
SUMMARY_KEYS = {
    "requests": ("requests",),
    "input_tokens": ("input_tokens",),
    "hit_tokens": ("hit_tokens",),
    "ideal_hit_ratio": ("ideal_hit_ratio",),
    "hit_token_share": ("hit_token_share",),
    "reuses": ("reuse_time", "count"),
    "reuse_p50_s": ("reuse_time", "p50_s"),
    "reuse_p90_s": ("reuse_time", "p90_s"),
    "reuse_p99_s": ("reuse_time", "p99_s"),
    "exp_rate_per_s": ("reuse_time", "exp_rate_per_s"),
    "ks": ("reuse_time", "ks"),
    "keys": ("lifespan", "keys"),
    "lifespan_p50_s": ("lifespan", "p50_s"),
    "never_reused_share": ("lifespan", "never_reused_share"),
    "keys_for_90": ("skew", "keys_for_90"),
    "requests_for_90": ("skew", "requests_for_90"),
}


def _at(metrics: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        metrics = metrics[key]
    return metrics


def test_a_profile_over_http_equals_the_cli(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=7)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    body = {**CONFIG, "trace_id": uploaded["id"]}
    r = api.post("/v1/profiles", json=body, headers={"Idempotency-Key": "profile-1"})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/profiles/{r.json()['id']}"
    again = api.post("/v1/profiles", json=body, headers={"Idempotency-Key": "profile-1"})
    assert again.status_code == 200 and again.json()["id"] == r.json()["id"]
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    assert job["kind"] == "profile" and job["stage"] == "done"
    # the CLI on the same config
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({**CONFIG, "trace_file_path": str(trace), "output_result_path": str(tmp_path)}))
    cli_json = tmp_path / "cli.json"
    assert main(["profile", str(config_file), "-o", str(cli_json)]) == 0
    capsys.readouterr()
    served = api.get(job["links"]["result"])
    assert served.status_code == 200
    assert served.content == cli_json.read_bytes()
    result = json.loads(served.content)
    lanes = result["lanes"]
    assert [lane["lane"] for lane in lanes] == ["b16", "b32", "b16-ttl60"]
    assert [row["instance_id"] for row in job["lanes"]] == ["b16", "b32", "b16-ttl60"]
    assert all(row["state"] == "succeeded" and row["worker"] for row in job["lanes"])
    # the TTL lane loses hits the LRU lane of the same block size keeps
    assert lanes[2]["ttl_s"] == 60.0 and lanes[0]["ttl_s"] is None
    assert 0 < lanes[2]["overall"]["hit_tokens"] < lanes[0]["overall"]["hit_tokens"]
    # the SQL summary: per lane, the lane (category null) then its categories, equal to the JSON
    summary = job["summary"]
    expected = []
    for i, lane in enumerate(lanes):
        expected.append((i, lane["lane"], None, lane["overall"]))
        expected += [(i, lane["lane"], name, m) for name, m in lane["categories"].items()]
    assert len(summary) == len(expected) > 3 * 2
    for row, (i, instance_id, category, metrics) in zip(summary, expected, strict=True):
        assert (row["lane"], row["instance_id"], row["category"]) == (i, instance_id, category)
        for column, path in SUMMARY_KEYS.items():
            assert row[column] == _at(metrics, path), (column, category)
    for name in PLOT_NAMES:
        png = api.get(job["links"][name])
        assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
        svg = api.get(job["links"][name].removesuffix(".png") + ".svg")
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
        assert b"<svg" in svg.content[:2000]
    assert api.get(f"/v1/profiles/{job['id']}/plots/nothing.png").status_code == 422
    assert api.get(f"/v1/profiles/{job['id']}/plots/reuse_time.gif").status_code == 422
    listed = api.get("/v1/profiles?limit=5").json()
    assert job["id"] in [item["id"] for item in listed["items"]]
    assert api.delete(f"/v1/profiles/{job['id']}").status_code == 409  # it already ended


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        ({"instances": []}, ["body", "instances"]),
        ({"instance_groups": [{"name": "g", "ttl_seconds": -1}]}, ["body", "instance_groups", 0]),
        ({"block_size": 0}, ["body", "block_size"]),
    ],
)
def test_bad_profiles_get_422_naming_the_field(api: Any, tmp_path: Path, patch: dict[str, Any], loc: list[Any]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, seed=8)
    uploaded = upload(api, trace.read_bytes(), "qwen.jsonl")
    r = api.post("/v1/profiles", json={**CONFIG, "trace_id": uploaded["id"], **patch})
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(d["loc"][: len(loc)] == loc for d in details), details


def test_a_profile_of_a_missing_trace_is_422(api: Any) -> None:
    r = api.post("/v1/profiles", json={**CONFIG, "trace_file_path": "nowhere/trace.jsonl"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["loc"][:2] == ["body", "trace_file_path"]


def test_unknown_profiles_are_404(api: Any) -> None:
    unknown = "/v1/profiles/" + "0" * 32
    for path in (unknown, f"{unknown}/profile.json", f"{unknown}/plots/reuse_time.png"):
        assert api.get(path).status_code == 404
    assert api.delete(unknown).status_code == 404
