"""The Celery tasks: one per stage of every job kind, generated from the registry
(litehit.jobs.stages.stage_functions). Each is a thin adapter: it opens a session and calls the
stage function with the ids it was sent; transient errors (the database or the broker briefly
down) are retried with backoff, everything else is recorded on the job's rows by the stage
itself."""

from __future__ import annotations

from typing import Any

from celery import Task

from litehit.db.session import session_scope
from litehit.jobs.errors import TRANSIENT
from litehit.jobs.stages import StageFunction, stage_functions
from litehit.settings import get_settings
from worker.celery_app import app, enqueue

__all__ = ["TASKS"]

RETRY = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 8,
    "retry_jitter": True,
}


def _task(name: str, stage: StageFunction) -> Task:
    def run(*ids: Any) -> str:
        with session_scope() as session:
            return stage(session, get_settings(), enqueue, *ids)

    run.__name__ = run.__qualname__ = name.rsplit(".", 2)[-2] + "_" + name.rsplit(".", 1)[-1]
    task: Task = app.task(name=name, **RETRY)(run)
    return task


TASKS: dict[str, Task] = {name: _task(name, stage) for name, stage in stage_functions().items()}
"""Every task by name (litehit.<kind's tasks>.<stage>)."""
