"""One part of a job's parallel stage (a replay lane, a sweep simulation, a window lane), run the
same way for every job kind: claim it, do the work, record the outcome as the holder of the claim,
and start the merge when it was the last part. Only the work and the row values differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from litehit.db.models import Job
from litehit.db.states import LaneState
from litehit.errors import ReplayCancelled
from litehit.settings import Settings
from litehit.storage import Storage
from worker.errors import TRANSIENT
from worker.jobs.state import (
    Part,
    PartClaim,
    claim_part,
    claimed_attempt,
    end_cancelled,
    error_text,
    fail_job,
    fail_job_from,
    finish_part,
    try_start_merge,
)
from worker.jobs.submit import Enqueue

__all__ = ["PartWork", "run_part"]

PartWork = Callable[[Job, Any, int], dict[str, Any]]
"""(job, the part's row, the claimed attempt) -> the values the succeeded row records."""


def run_part(
    session: Session,
    settings: Settings,
    model: Part,
    job_id: str,
    index: int,
    enqueue: Enqueue,
    merge_task: str,
    *,
    noun: str,
    describe: Callable[[Any], str],
    work: PartWork,
) -> str:
    """Runs part `index` of the job; returns what happened (claimed states, "failed",
    "superseded" when another worker took the part over, "succeeded"). A failure ends the job with
    `describe(row)` and the reason; a cancellation ends it cancelled, also when this part finds
    the job cancelled while nobody works on it any more (its workers died)."""
    storage = Storage(settings.storage)
    claim = claim_part(session, model, job_id, index, settings.stale_after_s, settings.task_max_attempts)
    if claim == PartClaim.EXHAUSTED:
        reason = f"{noun} {index}: gave up after {settings.task_max_attempts} attempts (worker lost?)"
        if fail_job(session, job_id, reason):
            storage.remove_work(job_id)
        return claim
    if claim == PartClaim.STOPPED:  # cancelled (or over): end it if its workers are gone
        if end_cancelled(session, job_id, settings.stale_after_s):
            storage.remove_work(job_id)
        return claim
    if claim != PartClaim.CLAIMED:
        return claim
    attempt = claimed_attempt(session, model, job_id, index)
    job, row = session.get(Job, job_id), session.get(model, (job_id, index))
    assert job is not None and row is not None
    try:
        values = work(job, row, attempt)
    except TRANSIENT:
        raise
    except Exception as exc:
        reason = error_text(exc, storage.root)
        if not finish_part(session, model, job_id, index, attempt, LaneState.FAILED, error=reason):
            return "superseded"  # another worker took the part over: its outcome counts
        if isinstance(exc, ReplayCancelled):
            fail_job_from(session, storage, job_id, exc)
        elif fail_job(session, job_id, f"{describe(row)}: {reason}"):
            storage.remove_work(job_id)
        return "failed"
    if not finish_part(session, model, job_id, index, attempt, LaneState.SUCCEEDED, **values):
        return "superseded"
    if try_start_merge(session, model, job_id):
        enqueue(merge_task, job_id)
    return "succeeded"
