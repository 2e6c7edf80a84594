"""Idempotency under a race, on real PostgreSQL: 20 threads submit the same request with the same
Idempotency-Key at once. Exactly one job is created; every other submission gets that job, also
those whose insert lost the race (IntegrityError) and looked the job up again: that lookup must
compare the original request, not the config the submission had rewritten meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from litehit.db.models import Job
from litehit.db.session import get_engine
from litehit.jobs.policy_sweep import KIND as SWEEP
from litehit.jobs.query import KIND as QUERY
from litehit.jobs.query import QueryCreate
from litehit.jobs.replay import KIND as REPLAY
from litehit.jobs.submit import create_facts_job, create_trace_job
from litehit.storage import Storage

pytestmark = pytest.mark.service

THREADS = 20
ROUNDS = 4
CONFIG = {"block_size": 512, "instance_groups": [{"name": "g"}], "instances": [instance("b512", 512, group="g")]}
Submit = Callable[[Session, str], tuple[Job, bool]]


def race(url: str, key: str, submit: Submit) -> list[tuple[str, bool] | BaseException]:
    """Every thread with its own session and connection, released at once by a barrier."""
    barrier = threading.Barrier(THREADS)
    results: list[tuple[str, bool] | BaseException] = [RuntimeError("did not run")] * THREADS

    def run(i: int) -> None:
        with Session(get_engine(url), expire_on_commit=False) as session:
            barrier.wait()
            try:
                job, created = submit(session, key)
                results[i] = (job.id, created)
            except BaseException as exc:
                results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.fixture
def lost_inserts(postgres_url: str) -> Any:
    """Counts inserts that lost the race (the IntegrityError the submission then handles)."""
    counter = {"n": 0}

    def count(context: Any) -> None:
        if isinstance(context.sqlalchemy_exception, IntegrityError):
            counter["n"] += 1

    engine = get_engine(postgres_url)
    event.listen(engine, "handle_error", count)
    yield counter
    event.remove(engine, "handle_error", count)


@pytest.fixture
def storage(tmp_path: Path, data_dir: Path) -> Storage:
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:50]
    (tmp_path / "trace.jsonl").write_bytes(b"".join(lines))
    return Storage(tmp_path)


def check(url: str, name: str, submit: Submit, lost_inserts: dict[str, int]) -> None:
    before = lost_inserts["n"]
    for round_ in range(ROUNDS):
        results = race(url, f"{name}-{round_}", submit)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert errors == [], errors
        ok = [r for r in results if not isinstance(r, BaseException)]
        assert len({job_id for job_id, _ in ok}) == 1, ok
        assert sum(created for _, created in ok) == 1, ok
    assert lost_inserts["n"] > before, "no submission lost the insert race: the retry path was not exercised"


def test_concurrent_replay_submissions(postgres_url: str, storage: Storage, lost_inserts: dict[str, int]) -> None:
    def submit(session: Session, key: str) -> tuple[Job, bool]:
        return create_trace_job(
            REPLAY, session, storage, {**CONFIG, "trace_file_path": "trace.jsonl"}, idempotency_key=key
        )

    check(postgres_url, "replay", submit, lost_inserts)


def test_concurrent_sweep_submissions(postgres_url: str, storage: Storage, lost_inserts: dict[str, int]) -> None:
    def submit(session: Session, key: str) -> tuple[Job, bool]:
        config = {**CONFIG, "trace_file_path": "trace.jsonl"}
        return create_trace_job(SWEEP, session, storage, config, {"capacity_gb": [1]}, idempotency_key=key)

    check(postgres_url, "sweep", submit, lost_inserts)


def test_concurrent_query_submissions(postgres_url: str, storage: Storage, lost_inserts: dict[str, int]) -> None:
    with Session(get_engine(postgres_url), expire_on_commit=False) as session:
        parent, _ = create_trace_job(REPLAY, session, storage, {**CONFIG, "trace_file_path": "trace.jsonl"})

    def submit(session: Session, key: str) -> tuple[Job, bool]:
        body = QueryCreate(capacity_gb=[1, "inf", -1], replay_id=parent.id, targets=[0.9])
        return create_facts_job(QUERY, session, storage, body, idempotency_key=key)

    check(postgres_url, "query", submit, lost_inserts)
