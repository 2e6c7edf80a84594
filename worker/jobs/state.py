"""Job and lane state transitions as conditional SQL updates: a task claims work only if nobody
else holds it, so duplicated or redelivered messages are harmless."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import and_, exists, or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, LaneRun, SweepRun, WindowLane, host_pid, utcnow
from litehit.db.states import TERMINAL, JobState, LaneState, Stage
from litehit.errors import LiteHitError, ReplayCancelled
from litehit.storage import Storage

__all__ = [
    "Part",
    "PartClaim",
    "claim_job_stage",
    "claim_part",
    "claimed_attempt",
    "fail_job",
    "fail_job_from",
    "finish_part",
    "heartbeat_job",
    "heartbeat_part",
    "job_should_stop",
    "part_key",
    "try_start_merge",
]


class PartClaim(StrEnum):
    """What claim_part found."""

    CLAIMED = "claimed"  # this process runs the part now
    BUSY = "busy"  # another live worker runs it
    DONE = "done"  # it succeeded already
    EXHAUSTED = "exhausted"  # too many attempts
    STOPPED = "stopped"  # the job is over or cancelled


def claim_job_stage(
    session: Session, job_id: str, stages: tuple[Stage, ...], new_stage: Stage, stale_after_s: float
) -> bool:
    """Moves a job into new_stage (running) if it is waiting in one of `stages`, or if its
    holder of that stage stopped heartbeating. Commits. True when this caller owns the stage."""
    now = utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.state.in_((JobState.QUEUED, JobState.RUNNING)),
            Job.cancel_requested.is_(False),
            or_(
                and_(Job.stage.in_(stages), Job.stage != new_stage),
                and_(Job.stage == new_stage, or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale)),
            ),
        )
        .values(state=JobState.RUNNING, stage=new_stage, heartbeat_at=now, attempts=Job.attempts + 1)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if result.rowcount == 1:  # type: ignore[attr-defined]
        session.execute(update(Job).where(Job.id == job_id, Job.started_at.is_(None)).values(started_at=now))
        session.commit()
        return True
    return False


def heartbeat_job(session: Session, job_id: str, **values: Any) -> None:
    session.execute(update(Job).where(Job.id == job_id).values(heartbeat_at=utcnow(), **values))
    session.commit()


def job_should_stop(session: Session, job_id: str) -> bool:
    row = session.execute(select(Job.state, Job.cancel_requested).where(Job.id == job_id)).one_or_none()
    session.rollback()  # end the read transaction: later reads must see fresh rows
    return row is None or row.cancel_requested or row.state != JobState.RUNNING


def fail_job(session: Session, job_id: str, reason: str, *, state: JobState = JobState.FAILED) -> bool:
    """Ends a job that is not already over (the first failure wins). Commits."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state.not_in(TERMINAL))
        .values(state=state, error=reason, finished_at=utcnow(), stage=Stage.DONE)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def fail_job_from(session: Session, storage: Storage, job_id: str, exc: BaseException) -> None:
    """Ends a job because of exc: cancelled for ReplayCancelled, else failed with the reason
    (a user-facing one for LiteHitError, "internal error: ..." otherwise); drops its work files."""
    state = JobState.CANCELLED if isinstance(exc, ReplayCancelled) else JobState.FAILED
    if fail_job(session, job_id, error_text(exc), state=state):
        storage.remove_work(job_id)


def error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, LiteHitError) else f"internal error: {type(exc).__name__}: {exc}"


Part = type[LaneRun] | type[SweepRun] | type[WindowLane]
"""The rows of a job's parallel stage: the lanes of a replay, the simulations of a sweep, the
lanes of a window sizing."""

_PART_STAGE: dict[Any, Stage] = {LaneRun: Stage.LANES, SweepRun: Stage.SIMULATE, WindowLane: Stage.SIZE}


def part_key(model: Part) -> Any:
    """The column that numbers the parts of one job."""
    return SweepRun.run if model is SweepRun else model.lane


def claim_part(
    session: Session, model: Part, job_id: str, index: int, stale_after_s: float, max_attempts: int
) -> PartClaim:
    """Claims one part of a job's parallel stage for this process, or says why not (see
    PartClaim). Commits."""
    now = utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    job_running = exists().where(
        Job.id == job_id,
        Job.state == JobState.RUNNING,
        Job.stage == _PART_STAGE[model],
        Job.cancel_requested.is_(False),
    )
    values: dict[str, Any] = {"requests": 0, "blocks": 0} if model is LaneRun else {"requests": 0}
    result = session.execute(
        update(model)
        .where(
            model.job_id == job_id,
            part_key(model) == index,
            model.attempts < max_attempts,
            or_(
                model.state == LaneState.QUEUED,
                and_(model.state == LaneState.RUNNING, model.heartbeat_at < stale),
            ),
            job_running,
        )
        .values(
            state=LaneState.RUNNING,
            attempts=model.attempts + 1,
            worker=host_pid(),
            heartbeat_at=now,
            started_at=now,
            error=None,
            **values,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return PartClaim.CLAIMED
    row = cast("LaneRun | SweepRun | WindowLane | None", session.get(model, (job_id, index)))
    job = session.get(Job, job_id)
    session.rollback()
    if row is None or job is None or job.state != JobState.RUNNING or job.cancel_requested:
        return PartClaim.STOPPED
    if row.state == LaneState.SUCCEEDED:
        return PartClaim.DONE
    if row.attempts >= max_attempts:
        return PartClaim.EXHAUSTED
    return PartClaim.BUSY


def claimed_attempt(session: Session, model: Part, job_id: str, index: int) -> int:
    """The attempt number this process holds after a CLAIMED claim_part: its fence. A worker
    whose part was taken over (stale heartbeat) no longer matches it and can write nothing."""
    attempts = session.scalar(select(model.attempts).where(model.job_id == job_id, part_key(model) == index))
    session.rollback()  # end the read transaction
    assert attempts is not None
    return int(attempts)


def heartbeat_part(session: Session, model: Part, job_id: str, index: int, attempt: int, **values: Any) -> bool:
    """Records progress of the holder of `attempt`; False when another worker took the part over."""
    result = session.execute(
        update(model)
        .where(model.job_id == job_id, part_key(model) == index, model.attempts == attempt)
        .values(heartbeat_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def finish_part(
    session: Session, model: Part, job_id: str, index: int, attempt: int, state: LaneState, **values: Any
) -> bool:
    """Ends the part as the holder of `attempt`; False (nothing written) when another worker took
    it over, so a late worker never overwrites the outcome of the one that replaced it."""
    result = session.execute(
        update(model)
        .where(model.job_id == job_id, part_key(model) == index, model.attempts == attempt)
        .values(state=state, finished_at=utcnow(), heartbeat_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def try_start_merge(session: Session, model: Part, job_id: str) -> bool:
    """True for exactly one caller, once every part of the job's parallel stage has succeeded.
    Commits."""
    pending = exists().where(model.job_id == job_id, model.state != LaneState.SUCCEEDED)
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.stage == _PART_STAGE[model], ~pending)
        .values(stage=Stage.MERGE, heartbeat_at=None)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]
