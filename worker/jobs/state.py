"""Job and lane state transitions as conditional SQL updates: a task claims work only if nobody
else holds it, so duplicated or redelivered messages are harmless."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, exists, or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, LaneRun, host_pid, utcnow
from litehit.db.states import TERMINAL, JobState, LaneState, Stage

__all__ = [
    "LaneClaim",
    "claim_job_stage",
    "claim_lane",
    "fail_job",
    "finish_lane",
    "heartbeat_job",
    "heartbeat_lane",
    "job_should_stop",
    "try_start_merge",
]


class LaneClaim(StrEnum):
    """What claim_lane found."""

    CLAIMED = "claimed"  # this process runs the lane now
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


def claim_lane(session: Session, job_id: str, lane: int, stale_after_s: float, max_attempts: int) -> LaneClaim:
    """Claims a lane for this process, or says why not (see LaneClaim). Commits."""
    now = utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    job_running = exists().where(
        Job.id == job_id, Job.state == JobState.RUNNING, Job.stage == Stage.LANES, Job.cancel_requested.is_(False)
    )
    result = session.execute(
        update(LaneRun)
        .where(
            LaneRun.job_id == job_id,
            LaneRun.lane == lane,
            LaneRun.attempts < max_attempts,
            or_(
                LaneRun.state == LaneState.QUEUED,
                and_(LaneRun.state == LaneState.RUNNING, LaneRun.heartbeat_at < stale),
            ),
            job_running,
        )
        .values(
            state=LaneState.RUNNING,
            attempts=LaneRun.attempts + 1,
            worker=host_pid(),
            heartbeat_at=now,
            started_at=now,
            requests=0,
            blocks=0,
            error=None,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return LaneClaim.CLAIMED
    row = session.get(LaneRun, (job_id, lane))
    job = session.get(Job, job_id)
    session.rollback()
    if row is None or job is None or job.state != JobState.RUNNING or job.cancel_requested:
        return LaneClaim.STOPPED
    if row.state == LaneState.SUCCEEDED:
        return LaneClaim.DONE
    if row.attempts >= max_attempts:
        return LaneClaim.EXHAUSTED
    return LaneClaim.BUSY


def heartbeat_lane(session: Session, job_id: str, lane: int, **values: Any) -> None:
    session.execute(
        update(LaneRun).where(LaneRun.job_id == job_id, LaneRun.lane == lane).values(heartbeat_at=utcnow(), **values)
    )
    session.commit()


def finish_lane(session: Session, job_id: str, lane: int, state: LaneState, **values: Any) -> None:
    session.execute(
        update(LaneRun)
        .where(LaneRun.job_id == job_id, LaneRun.lane == lane)
        .values(state=state, finished_at=utcnow(), heartbeat_at=utcnow(), **values)
    )
    session.commit()


def try_start_merge(session: Session, job_id: str) -> bool:
    """True for exactly one caller, once every lane of the job has succeeded. Commits."""
    pending = exists().where(LaneRun.job_id == job_id, LaneRun.state != LaneState.SUCCEEDED)
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.stage == Stage.LANES, ~pending)
        .values(stage=Stage.MERGE, heartbeat_at=None)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]
