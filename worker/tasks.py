"""Celery tasks: thin adapters that take ids, open a session and call the job functions.

Transient errors (database or broker briefly down) are retried with backoff; everything else
is recorded on the job row by the job functions themselves.
"""

from __future__ import annotations

from litehit.db.session import session_scope
from litehit.settings import get_settings
from worker.celery_app import app, enqueue
from worker.errors import TRANSIENT
from worker.jobs.profile_job import run_profile_lane, run_profile_merge, run_profile_parse
from worker.jobs.query_job import run_query
from worker.jobs.replay_job import run_lane, run_merge, run_parse
from worker.jobs.submit import (
    LANE_TASK,
    MERGE_TASK,
    PARSE_TASK,
    PROFILE_LANE_TASK,
    PROFILE_MERGE_TASK,
    PROFILE_PARSE_TASK,
    QUERY_TASK,
    SWEEP_MERGE_TASK,
    SWEEP_PARSE_TASK,
    SWEEP_RUN_TASK,
    WINDOW_LANE_TASK,
    WINDOW_MERGE_TASK,
    WINDOW_PARSE_TASK,
)
from worker.jobs.sweep_job import run_sweep_merge, run_sweep_parse, run_sweep_run
from worker.jobs.window_job import run_window_lane, run_window_merge, run_window_parse

RETRY = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 8,
    "retry_jitter": True,
}


@app.task(name=PARSE_TASK, **RETRY)
def replay_parse(job_id: str) -> str:
    with session_scope() as session:
        return run_parse(session, get_settings(), job_id, enqueue)


@app.task(name=LANE_TASK, **RETRY)
def replay_lane(job_id: str, lane: int) -> str:
    with session_scope() as session:
        return run_lane(session, get_settings(), job_id, lane, enqueue)


@app.task(name=MERGE_TASK, **RETRY)
def replay_merge(job_id: str) -> str:
    with session_scope() as session:
        return run_merge(session, get_settings(), job_id)


@app.task(name=QUERY_TASK, **RETRY)
def query_run(job_id: str) -> str:
    with session_scope() as session:
        return run_query(session, get_settings(), job_id)


@app.task(name=SWEEP_PARSE_TASK, **RETRY)
def sweep_parse(job_id: str) -> str:
    with session_scope() as session:
        return run_sweep_parse(session, get_settings(), job_id, enqueue)


@app.task(name=SWEEP_RUN_TASK, **RETRY)
def sweep_run(job_id: str, run: int) -> str:
    with session_scope() as session:
        return run_sweep_run(session, get_settings(), job_id, run, enqueue)


@app.task(name=SWEEP_MERGE_TASK, **RETRY)
def sweep_merge(job_id: str) -> str:
    with session_scope() as session:
        return run_sweep_merge(session, get_settings(), job_id)


@app.task(name=WINDOW_PARSE_TASK, **RETRY)
def window_parse(job_id: str) -> str:
    with session_scope() as session:
        return run_window_parse(session, get_settings(), job_id, enqueue)


@app.task(name=WINDOW_LANE_TASK, **RETRY)
def window_lane(job_id: str, lane: int) -> str:
    with session_scope() as session:
        return run_window_lane(session, get_settings(), job_id, lane, enqueue)


@app.task(name=WINDOW_MERGE_TASK, **RETRY)
def window_merge(job_id: str) -> str:
    with session_scope() as session:
        return run_window_merge(session, get_settings(), job_id)


@app.task(name=PROFILE_PARSE_TASK, **RETRY)
def profile_parse(job_id: str) -> str:
    with session_scope() as session:
        return run_profile_parse(session, get_settings(), job_id, enqueue)


@app.task(name=PROFILE_LANE_TASK, **RETRY)
def profile_lane(job_id: str, lane: int) -> str:
    with session_scope() as session:
        return run_profile_lane(session, get_settings(), job_id, lane, enqueue)


@app.task(name=PROFILE_MERGE_TASK, **RETRY)
def profile_merge(job_id: str) -> str:
    with session_scope() as session:
        return run_profile_merge(session, get_settings(), job_id)
