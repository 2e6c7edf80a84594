"""The service under failure: a worker killed mid-lane, the broker crashing mid-job, many
concurrent submissions, auth, migrations and the recovery sweep."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from service_fixtures import RedisServer, Workers, wait_for
from sqlalchemy import create_engine, inspect, select, update
from test_service_api import CONFIG, upload, wait_job

from litehit.db.migrate import downgrade, upgrade
from litehit.db.models import Job, JobPart, utcnow
from litehit.db.session import session_scope
from litehit.jobs.recovery import sweep
from litehit.jobs.replay import run_replay
from litehit.settings import Settings
from litehit.spec import parse_replay_spec

pytestmark = pytest.mark.service

TWO_LANES = {**CONFIG, "instances": CONFIG["instances"][:2], "instance_groups": CONFIG["instance_groups"][:1]}


def long_trace(rows: int, width: int = 40) -> bytes:
    return (
        "\n".join(
            json.dumps(
                {"timestamp": i, "input_length": 512 * width + 3, "hash_ids": list(range(i * 5, i * 5 + width + 1))}
            )
            for i in range(rows)
        )
        + "\n"
    ).encode()


def local_facts(tmp_path: Path, data: bytes, config: dict[str, Any]) -> bytes:
    trace = tmp_path / "local.jsonl"
    trace.write_bytes(data)
    out = tmp_path / "local-out"
    out.mkdir()
    run_replay(parse_replay_spec({**config, "trace_file_path": str(trace), "output_result_path": str(out)}))
    return (out / "litehit_facts.csv").read_bytes()


def lane_rows(settings: Settings, job_id: str) -> list[JobPart]:
    with session_scope(settings.db_url) as session:
        return list(session.scalars(select(JobPart).where(JobPart.job_id == job_id).order_by(JobPart.part)))


def test_worker_killed_mid_lane(api: Any, service_settings: Settings, celery_workers: Workers, tmp_path: Path) -> None:
    """A worker process SIGKILLed while it replays a lane: once the lane's heartbeat is stale it
    is claimed again (its message redelivered, or sent again by the recovery sweep), and the job
    ends succeeded with the same facts as an uninterrupted in-process replay."""
    data = long_trace(200_000)
    trace = upload(api, data, "kill.jsonl")
    job_id = api.post("/v1/replays", json={**TWO_LANES, "trace_id": trace["id"]}).json()["id"]
    running = wait_for(
        lambda: next((r for r in lane_rows(service_settings, job_id) if r.state == "running"), None),
        120,
        "a running lane",
        interval=0.005,
    )
    pid = int(running.worker.rsplit(":", 1)[1])
    assert pid in celery_workers.children()
    os.kill(pid, signal.SIGKILL)
    job = wait_job(api, f"/v1/replays/{job_id}", timeout=120)
    assert job["state"] == "succeeded", job["error"]
    killed = next(lane for lane in job["lanes"] if lane["lane"] == running.part)
    assert killed["attempts"] == 2  # the kill hit the lane mid-run: it was run once more, not skipped
    facts = service_settings.storage / "jobs" / job_id / "out" / "litehit_facts.csv"
    assert facts.read_bytes() == local_facts(tmp_path, data, TWO_LANES)
    assert not (facts.parent / "litehit_facts.csv.tmp").exists()
    wait_for(lambda: len(celery_workers.children()) >= 2, 30, "the pool to replace the killed process")


def test_broker_crash_mid_job(api: Any, service_settings: Settings, redis_server: RedisServer, tmp_path: Path) -> None:
    data = long_trace(150_000)
    trace = upload(api, data, "crash.jsonl")
    job_id = api.post("/v1/replays", json={**TWO_LANES, "trace_id": trace["id"]}).json()["id"]
    wait_for(
        lambda: api.get(f"/v1/replays/{job_id}").json()["state"] == "running", 60, "the job to start", interval=0.01
    )
    redis_server.stop()  # every queued and unacknowledged message is lost
    time.sleep(1.5)
    redis_server.start()
    job = wait_job(api, f"/v1/replays/{job_id}", timeout=180)
    assert job["state"] == "succeeded", job["error"]
    facts = service_settings.storage / "jobs" / job_id / "out" / "litehit_facts.csv"
    assert facts.read_bytes() == local_facts(tmp_path, data, TWO_LANES)


def test_fifty_concurrent_submissions_all_complete(api: Any, data_dir: Path) -> None:
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:400]
    trace = upload(api, b"".join(lines), "small.jsonl")
    config = {**CONFIG, "instances": CONFIG["instances"][:1], "instance_groups": CONFIG["instance_groups"][:1]}
    ids: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def submit(i: int) -> None:
        r = api.post("/v1/replays", json={**config, "trace_id": trace["id"]}, headers={"Idempotency-Key": f"fifty-{i}"})
        with lock:
            (ids if r.status_code == 202 else errors).append(r.json().get("id", r.text))

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(ids)) == 50
    states = [wait_job(api, f"/v1/replays/{i}", timeout=300)["state"] for i in ids]
    assert states == ["succeeded"] * 50
    rows = {api.get(f"/v1/replays/{i}").json()["stats"]["facts_rows"] for i in ids}
    assert rows == {400}


def test_auth_is_enforced_when_a_token_is_set(service_settings: Settings) -> None:
    from fastapi.testclient import TestClient

    from api.main import create_app

    settings = service_settings.model_copy(update={"api_token": "s3cret", "sweep_interval_s": 0})
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        assert client.get("/healthz").status_code == 200
        for method, url in [
            ("get", "/v1/replays"),
            ("get", "/v1/traces"),
            ("post", "/v1/queries"),
            ("get", "/v1/queries/x"),
        ]:
            r = getattr(client, method)(url)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", url
            assert r.headers["www-authenticate"] == "Bearer"
        assert client.get("/v1/replays", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/v1/replays", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def part(job_id: str, index: int, label: str, *, heartbeat: Any, attempts: int = 1, **plan: Any) -> JobPart:
    """A running part of a job (its plan: the lane, its instance and what the kind adds)."""
    return JobPart(
        job_id=job_id,
        part=index,
        label=label,
        state="running",
        attempts=attempts,
        heartbeat_at=heartbeat,
        plan={"lane": index, "instance_id": label, **plan},
        progress={},
    )


def test_sweep_retries_stale_lanes_and_gives_up_after_max_attempts(service_settings: Settings) -> None:
    sent: list[tuple[Any, ...]] = []
    long_ago = utcnow().replace(year=2000)
    with session_scope(service_settings.db_url) as session:
        job = Job(kind="replay", spec={}, state="running", stage="lanes", stats={}, progress={}, heartbeat_at=long_ago)
        session.add(job)
        session.flush()
        session.add_all(
            [
                part(job.id, 0, "a", heartbeat=long_ago),
                part(job.id, 1, "b", heartbeat=utcnow()),
            ]
        )
        session.commit()
        actions = sweep(session, service_settings, lambda *a: sent.append(a))
        assert f"retried lane 0 of {job.id}" in actions and ("litehit.replay.lane", job.id, 0) in sent
        assert ("litehit.replay.lane", job.id, 1) not in sent
        session.execute(update(JobPart).where(JobPart.job_id == job.id, JobPart.part == 0).values(attempts=3))
        session.commit()
        sweep(session, service_settings, lambda *a: sent.append(a))
        session.refresh(job)
        assert job.state == "failed" and "lane a: gave up after 3 attempts" in (job.error or "")


def test_sweep_retries_stale_simulations_of_a_policy_sweep(service_settings: Settings) -> None:
    sent: list[tuple[Any, ...]] = []
    long_ago = utcnow().replace(year=2000)

    def run(index: int, heartbeat: Any, attempts: int = 1) -> JobPart:
        sim = {"run": index, "policy": "lru", "slot": index, "capacity_gb": 1.0, "capacity_blocks": 8}
        row = part("", index, str(index), heartbeat=heartbeat, attempts=attempts, **sim)
        row.plan = {**row.plan, "lane": 0, "instance_id": "a"}
        return row

    with session_scope(service_settings.db_url) as session:
        job = Job(
            kind="policy_sweep",
            spec={},
            state="running",
            stage="simulate",
            stats={},
            progress={},
            heartbeat_at=long_ago,
        )
        session.add(job)
        session.flush()
        stale, fresh = run(0, long_ago), run(1, utcnow())
        stale.job_id = fresh.job_id = job.id
        session.add_all([stale, fresh])
        session.commit()
        actions = sweep(session, service_settings, lambda *a: sent.append(a))
        assert f"retried simulation 0 of {job.id}" in actions and ("litehit.sweep.run", job.id, 0) in sent
        assert ("litehit.sweep.run", job.id, 1) not in sent
        session.execute(update(JobPart).where(JobPart.job_id == job.id, JobPart.part == 0).values(attempts=3))
        session.commit()
        sweep(session, service_settings, lambda *a: sent.append(a))
        session.refresh(job)
        assert job.state == "failed" and "simulation 0: gave up after 3 attempts" in (job.error or "")


def test_sweep_requeues_queued_jobs_whose_message_was_lost(service_settings: Settings) -> None:
    sent: list[tuple[Any, ...]] = []
    with session_scope(service_settings.db_url) as session:
        job = Job(
            kind="query", spec={}, state="queued", stats={}, progress={}, heartbeat_at=utcnow().replace(year=2000)
        )
        session.add(job)
        session.commit()
        sweep(session, service_settings, lambda *a: sent.append(a))
        assert ("litehit.query.run", job.id) in sent
        sent.clear()
        sweep(session, service_settings, lambda *a: sent.append(a))  # just re-sent: not again yet
        assert ("litehit.query.run", job.id) not in sent
        session.execute(update(Job).where(Job.id == job.id).values(state="cancelled"))


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_migrations_create_and_remove_everything(backend: str, tmp_path: Path) -> None:
    if backend == "postgresql":
        from service_fixtures import create_database, drop_database

        name, url = create_database()
    else:
        name, url = "", f"sqlite:///{tmp_path / 'm.db'}"
    try:
        upgrade(url)
        engine = create_engine(url)
        assert {"traces", "jobs", "job_parts", "query_summaries"} <= set(inspect(engine).get_table_names())
        downgrade(url)
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        engine.dispose()
    finally:
        if name:
            drop_database(name)


_ = instance


def test_schema_head_constant_matches_the_migrations() -> None:
    from alembic.script import ScriptDirectory

    from litehit.db.migrate import SCHEMA_HEAD, alembic_config

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == SCHEMA_HEAD


def test_a_worker_whose_part_was_taken_over_can_write_nothing(service_settings: Settings) -> None:
    from litehit.db.states import LaneState, Stage
    from litehit.jobs.state import PartClaim, claim_part, claimed_attempt, finish_part, heartbeat_part

    stage = Stage.SIMULATE
    with session_scope(service_settings.db_url) as session:
        job = Job(kind="policy_sweep", spec={}, state="running", stage="simulate", stats={}, progress={})
        session.add(job)
        session.flush()
        row = part(job.id, 0, "0", heartbeat=None, attempts=0, run=0, policy="lru", slot=0)
        row.state = "queued"
        session.add(row)
        session.commit()
        assert claim_part(session, job.id, 0, stage, 30.0, 3) == PartClaim.CLAIMED
        first = claimed_attempt(session, job.id, 0)
        assert claim_part(session, job.id, 0, stage, 30.0, 3) == PartClaim.BUSY  # its heartbeat is fresh
        session.execute(
            update(JobPart).where(JobPart.job_id == job.id).values(heartbeat_at=utcnow().replace(year=2000))
        )
        session.commit()
        assert claim_part(session, job.id, 0, stage, 30.0, 3) == PartClaim.CLAIMED  # taken over
        second = claimed_attempt(session, job.id, 0)
        assert second == first + 1
        assert not heartbeat_part(session, job.id, 0, first, progress={"requests": 5})
        assert finish_part(session, job.id, 0, second, LaneState.SUCCEEDED, result={"hit_blocks": 42})
        assert not finish_part(session, job.id, 0, first, LaneState.FAILED, error="late")
        session.expire_all()
        final = session.get(JobPart, (job.id, 0))
        assert final is not None and (final.state, final.result["hit_blocks"], final.error) == ("succeeded", 42, None)


def test_sweep_retries_stale_lanes_of_a_window_sizing(service_settings: Settings) -> None:
    sent: list[tuple[Any, ...]] = []
    long_ago = utcnow().replace(year=2000)

    def lane(index: int, heartbeat: Any) -> JobPart:
        return part("", index, "ab"[index], heartbeat=heartbeat, capacity_blocks=8)

    with session_scope(service_settings.db_url) as session:
        job = Job(kind="window", spec={}, state="running", stage="size", stats={}, progress={}, heartbeat_at=long_ago)
        session.add(job)
        session.flush()
        stale, fresh = lane(0, long_ago), lane(1, utcnow())
        stale.job_id = fresh.job_id = job.id
        session.add_all([stale, fresh])
        session.commit()
        actions = sweep(session, service_settings, lambda *a: sent.append(a))
        assert f"retried lane 0 of {job.id}" in actions and ("litehit.window.lane", job.id, 0) in sent
        assert ("litehit.window.lane", job.id, 1) not in sent
        session.execute(update(JobPart).where(JobPart.job_id == job.id, JobPart.part == 0).values(attempts=3))
        session.commit()
        sweep(session, service_settings, lambda *a: sent.append(a))
        session.refresh(job)
        assert job.state == "failed" and "lane a: gave up after 3 attempts" in (job.error or "")
