"""Admission under a burst, with real processes: a cold ``uvicorn api.main:app`` on PostgreSQL and
Redis, a small database pool, and 150 concurrent ``POST /v1/replays``. Every answer is 202, or 503
with Retry-After in the documented error shape; none is a 500 or a client timeout; /healthz answers
throughout; and exactly the accepted jobs exist, queued, each with one message in the queue."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from service_fixtures import ROOT, free_port, settings_env, wait_for
from sqlalchemy import select, update
from test_service_api import CONFIG

from litehit.db.models import Job
from litehit.db.session import session_scope
from litehit.db.states import JobState
from litehit.settings import Settings

pytestmark = pytest.mark.service

BURST = 150
CLIENT_TIMEOUT_S = 30.0
BURST_BOUND_S = 30.0  # the bound for the whole burst
ONE_LANE = {**CONFIG, "instances": CONFIG["instances"][:1], "instance_groups": CONFIG["instance_groups"][:1]}


@dataclass
class ColdApi:
    url: str
    settings: Settings
    proc: subprocess.Popen[bytes]


@pytest.fixture
def cold_api(service_settings: Settings, tmp_path: Path) -> Iterator[ColdApi]:
    """The API in its own process, never requested before except /healthz, with a database pool
    of 2 connections and a queue no worker reads (the accepted jobs stay queued)."""
    settings = service_settings.model_copy(
        update={
            "queue": f"litehit-admission-{os.getpid()}",
            "db_pool_size": 2,  # so at most 2 submissions at once
            "admission_wait_s": 0.5,  # and a short wait: the burst meets refusals
            "stale_after_s": 600.0,  # the sweep sends nothing again during the test
        }
    )
    trace = settings.storage / "admission" / "burst.jsonl"
    trace.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"timestamp": i, "input_length": 2048, "hash_ids": [i, i + 1, i + 2, i + 3]} for i in range(50)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    port = free_port()
    log = (tmp_path / "api.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "api.main:app", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=settings_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), 60, "the API to start")
        yield ColdApi(url, settings, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        redis.Redis.from_url(settings.broker_url).delete(settings.queue)
        with session_scope(settings.db_url) as session:  # nothing left for other tests' workers
            session.execute(
                update(Job)
                .where(Job.state == JobState.QUEUED, Job.spec["trace_file_path"].as_string() == "admission/burst.jsonl")
                .values(state=JobState.CANCELLED, cancel_requested=True)
            )


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _queued_jobs(settings: Settings) -> set[str]:
    with session_scope(settings.db_url) as session:
        query = select(Job.id).where(
            Job.state == JobState.QUEUED, Job.spec["trace_file_path"].as_string() == "admission/burst.jsonl"
        )
        return set(session.scalars(query))


def queued_messages(settings: Settings) -> list[str]:
    """The job id of every message waiting in the broker's queue (kombu's Redis format: a JSON
    envelope whose base64 body is [args, kwargs, embed])."""
    raw = redis.Redis.from_url(settings.broker_url).lrange(settings.queue, 0, -1)
    return [json.loads(base64.b64decode(json.loads(m)["body"]))[0][0] for m in raw]


def test_a_cold_burst_is_admitted_or_refused_with_retry_after(cold_api: ColdApi) -> None:
    body = {**ONE_LANE, "trace_file_path": "admission/burst.jsonl"}
    answers: list[httpx.Response | Exception] = []
    took: list[float] = []
    health: list[tuple[int, float]] = []
    lock = threading.Lock()
    go, done = threading.Event(), threading.Event()
    limits = httpx.Limits(max_connections=BURST + 10, max_keepalive_connections=BURST + 10)
    client = httpx.Client(base_url=cold_api.url, timeout=CLIENT_TIMEOUT_S, limits=limits)

    def submit() -> None:
        go.wait()
        start = time.monotonic()
        try:
            answer: httpx.Response | Exception = client.post("/v1/replays", json=body)
        except httpx.HTTPError as exc:
            answer = exc
        with lock:
            answers.append(answer)
            took.append(time.monotonic() - start)

    def watch_health() -> None:
        with httpx.Client(base_url=cold_api.url, timeout=CLIENT_TIMEOUT_S) as probe:
            while not done.is_set():
                start = time.monotonic()
                try:
                    status = probe.get("/healthz").status_code
                except httpx.HTTPError:
                    status = 0
                health.append((status, time.monotonic() - start))
                time.sleep(0.2)

    threads = [threading.Thread(target=submit) for _ in range(BURST)]
    for t in threads:
        t.start()
    watcher = threading.Thread(target=watch_health)
    watcher.start()
    started = time.monotonic()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    done.set()
    watcher.join()
    client.close()

    failures = [repr(a) for a in answers if isinstance(a, Exception)]
    assert failures == [], failures[:3]
    responses = [a for a in answers if isinstance(a, httpx.Response)]
    statuses = Counter(r.status_code for r in responses)
    assert set(statuses) <= {202, 429, 503}, (statuses, [r.text for r in responses if r.status_code >= 500][:3])
    assert statuses[202] >= 1 and statuses[503] >= 1, statuses
    for r in responses:
        if r.status_code != 202:
            assert int(r.headers["Retry-After"]) >= 1
            error = r.json()["error"]
            assert error["code"] in ("service_unavailable", "too_many_requests") and error["message"], error
    assert elapsed < BURST_BOUND_S, f"the burst took {elapsed:.1f} s ({statuses})"
    assert health and all(status == 200 for status, _ in health), health
    assert max(s for _, s in health) < 10.0, health
    # Exactly the accepted jobs exist, queued, each enqueued once; a refusal left nothing behind.
    accepted = {r.json()["id"] for r in responses if r.status_code == 202}
    assert len(accepted) == statuses[202]
    assert _queued_jobs(cold_api.settings) == accepted
    assert Counter(queued_messages(cold_api.settings)) == Counter(accepted)
    assert cold_api.proc.poll() is None
