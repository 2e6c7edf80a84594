"""Cancel + worker death on the real stack (PostgreSQL, Redis, Celery worker processes, the API
with its recovery sweep): the job ends cancelled; and a clean replay counts one attempt per stage."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import Workers, wait_for
from test_service_api import CONFIG, upload, wait_job
from test_service_robustness import lane_rows, long_trace

from litehit.settings import Settings

pytestmark = pytest.mark.service

ONE_LANE = {**CONFIG, "instances": CONFIG["instances"][:1], "instance_groups": CONFIG["instance_groups"][:1]}


def test_a_job_cancelled_after_its_worker_was_killed_ends_cancelled(
    api: Any, service_settings: Settings, celery_workers: Workers
) -> None:
    """Issue 15 item 1: reach stage lanes, SIGKILL the worker process running the lane, DELETE
    the job. Its lane message comes back (redelivered, or sent again by the sweep) but no claim
    takes a cancelled job: before the fix it stayed running forever. Now it ends cancelled once
    the dead lane's heartbeat is stale, within a sweep or two."""
    trace = upload(api, long_trace(200_000), "cancel-kill.jsonl")
    job_id = api.post("/v1/replays", json={**ONE_LANE, "trace_id": trace["id"]}).json()["id"]
    running = wait_for(
        lambda: next((r for r in lane_rows(service_settings, job_id) if r.state == "running"), None),
        120,
        "a running lane",
        interval=0.005,
    )
    pid = int(running.worker.rsplit(":", 1)[1])
    assert pid in celery_workers.children()
    os.kill(pid, signal.SIGKILL)
    cancel = api.delete(f"/v1/replays/{job_id}")
    assert cancel.status_code == 200 and cancel.json()["cancel_requested"], cancel.text
    killed_at = time.monotonic()
    # stale_after_s (3 s) + sweep_interval_s (0.5 s), with a wide margin for a loaded machine
    job = wait_job(api, f"/v1/replays/{job_id}", timeout=60)
    assert (job["state"], job["stage"], job["error"]) == ("cancelled", "done", "cancelled; nothing was published")
    assert time.monotonic() - killed_at >= service_settings.stale_after_s - 1  # the dead lane was waited for
    assert job["lanes"][0]["attempts"] == 1  # never claimed again
    work = service_settings.storage / "jobs" / job_id / "work"
    wait_for(lambda: not work.exists(), 30, "its work files to be removed (right after the job ended)")
    wait_for(lambda: len(celery_workers.children()) >= 2, 30, "the pool to replace the killed process")


def test_a_clean_replay_counts_one_attempt_per_stage(api: Any, data_dir: Path) -> None:
    """Issue 13: a clean replay reported attempts 2 (its parse and its merge added up)."""
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:200]
    trace = upload(api, b"".join(lines), "clean.jsonl")
    job_id = api.post("/v1/replays", json={**ONE_LANE, "trace_id": trace["id"]}).json()["id"]
    job = wait_job(api, f"/v1/replays/{job_id}")
    assert job["state"] == "succeeded", job["error"]
    assert job["attempts"] == 1 and [lane["attempts"] for lane in job["lanes"]] == [1]
