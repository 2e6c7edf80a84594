"""Job and part state transitions as conditional SQL updates: a task claims work only if nobody
else holds it, so duplicated or redelivered messages are harmless. The same for every kind: a
job's parts are rows of one table (JobPart), fenced by their attempt."""

from __future__ import annotations

import errno
import re
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import and_, case, exists, or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, JobPart, host_pid, utcnow
from litehit.db.states import TERMINAL, JobState, LaneState, Stage
from litehit.errors import LiteHitError, ReplayCancelled
from litehit.jobs.registry import kinds
from litehit.publish import storage_reason
from litehit.storage import Storage

__all__ = [
    "RESENT_AT",
    "UNIT_DONE",
    "PartClaim",
    "claim_job_stage",
    "claim_part",
    "claimed_attempt",
    "end_cancelled",
    "fail_job",
    "fail_job_from",
    "finish_part",
    "heartbeat_job",
    "heartbeat_part",
    "job_should_stop",
    "part_pending",
    "parts_done",
    "succeed_job",
    "try_start_merge",
]


class PartClaim(StrEnum):
    """What claim_part found."""

    CLAIMED = "claimed"  # this process runs the part now
    BUSY = "busy"  # another live worker runs it
    DONE = "done"  # it succeeded already
    EXHAUSTED = "exhausted"  # too many attempts
    STOPPED = "stopped"  # the job is over or cancelled


UNIT_DONE = "succeeded with parts"
"""How a part's task that took other parts of its unit along says it succeeded: this, then their
indices (``parts_done`` reads them back)."""


def parts_done(outcome: object, index: int) -> list[int]:
    """The parts a part task's outcome says succeeded in it: [index] for "succeeded", index and
    the others for UNIT_DONE, none otherwise."""
    if outcome == "succeeded":
        return [index]
    if isinstance(outcome, str) and outcome.startswith(UNIT_DONE):
        return [index, *(int(k) for k in outcome.removeprefix(UNIT_DONE).split())]
    return []


def claim_job_stage(
    session: Session, job_id: str, stages: tuple[Stage, ...], new_stage: Stage, stale_after_s: float
) -> bool:
    """Moves a job into new_stage (running) if it is waiting in one of `stages`, or if its
    holder of that stage stopped heartbeating. Commits. True when this caller owns the stage.

    Job.attempts counts the claims of the current stage: 1 on entering a stage, one more for
    each takeover of it, so that recovery compares it with the per-stage task_max_attempts. A
    stage entered without a claim (the merge, see try_start_merge) has 0 and is free to claim."""
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
                and_(
                    Job.stage == new_stage,
                    or_(Job.attempts == 0, Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
                ),
            ),
        )
        .values(
            state=JobState.RUNNING,
            stage=new_stage,
            heartbeat_at=now,
            attempts=case((Job.stage == new_stage, Job.attempts + 1), else_=1),
        )
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


RESENT_AT = "resent_at"
"""The key of a job's progress where the recovery sweep notes when it last sent the job's stage
again (see litehit.jobs.recovery); dropped once the job succeeded."""


def succeed_job(session: Session, job_id: str, **values: Any) -> bool:
    """Ends a running job succeeded, recording `values` (its output path, stats, progress);
    False, writing nothing, when it ended meanwhile (e.g. cancelled while it merged: a terminal
    state is never left). Commits."""
    if isinstance(values.get("progress"), dict):
        values["progress"] = {k: v for k, v in values["progress"].items() if k != RESENT_AT}
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING)
        .values(state=JobState.SUCCEEDED, stage=Stage.DONE, finished_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def fail_job_from(session: Session, storage: Storage, job_id: str, exc: BaseException) -> None:
    """Ends a job because of exc: cancelled for ReplayCancelled, else failed with the reason
    (a user-facing one for LiteHitError, "internal error: ..." otherwise); drops its work files."""
    state = JobState.CANCELLED if isinstance(exc, ReplayCancelled) else JobState.FAILED
    if fail_job(session, job_id, error_text(exc, storage.root), state=state):
        storage.remove_work(job_id)


SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")
"""numpy's OSError for a write the file system cut short (no errno): the storage filled up."""


def error_text(exc: BaseException, root: Path | None = None) -> str:
    """A job's error for exc: a full or read-only storage in one line that says so (also when a
    LiteHitError wraps it); else a LiteHitError's own message, anything else "internal error:
    <type>: <message>". Paths inside the storage root `root` are shown relative to it: a job's
    error never shows where the server keeps its files."""
    trouble = _storage_trouble(exc)
    if isinstance(exc, LiteHitError) and (trouble is None or trouble[0] in str(exc)):
        text = str(exc)  # e.g. the publisher's "cannot write <path>: the storage is full"
    elif trouble is not None:
        text = trouble[1]
    else:
        text = f"internal error: {type(exc).__name__}: {exc}"
    if root is not None:  # root/x -> x, root itself -> ".", root-old/x stays
        text = re.sub(re.escape(str(root)) + r"(/|(?![\w.-]))", lambda m: "" if m[1] else ".", text)
    return text


def _storage_trouble(exc: BaseException) -> tuple[str, str] | None:
    """(reason, message) when a full or read-only storage caused exc or the error it was
    raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            reason = storage_reason(current)
            return reason, f"cannot write {current.filename}: {reason}" if current.filename else reason
        if isinstance(current, OSError) and (short := SHORT_WRITE.fullmatch(str(current))):
            reason = storage_reason(OSError(errno.ENOSPC, ""))
            return reason, f"{reason}: a write stopped after {short[2]} of {short[1]} bytes"
        current = current.__cause__ or current.__context__
    return None


def part_stages() -> tuple[Stage, ...]:
    """The parallel stages of every kind (a job there is held by its parts, not by one task)."""
    return tuple(k.part_stage for k in kinds() if k.part_stage is not None)


CANCELLED_REASON = "cancelled; nothing was published"


def end_cancelled(session: Session, job_id: str, stale_after_s: float, *, now: datetime | None = None) -> bool:
    """Ends a running job whose cancellation was requested once nobody works on it any more: no
    part of its parallel stage runs with a fresh heartbeat and, in any other stage, the job's own
    heartbeat is stale (its holder died). A live holder notices the cancellation itself. Nobody
    can start working on it later: claims refuse a job whose cancellation was requested. True
    when this call ended it (the caller removes its work files). Commits."""
    now = now or utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    live_part = exists().where(
        JobPart.job_id == job_id,
        JobPart.state == LaneState.RUNNING,
        JobPart.heartbeat_at.is_not(None),
        JobPart.heartbeat_at >= stale,
    )
    live_holder = and_(
        Job.stage.not_in(part_stages()),
        Job.attempts > 0,  # claimed (a merge no one claimed yet has 0)
        Job.heartbeat_at.is_not(None),
        Job.heartbeat_at >= stale,
    )
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.state == JobState.RUNNING,
            Job.cancel_requested.is_(True),
            ~or_(live_holder, live_part),
        )
        .values(state=JobState.CANCELLED, error=CANCELLED_REASON, finished_at=now, stage=Stage.DONE)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def claim_part(
    session: Session, job_id: str, index: int, stage: Stage, stale_after_s: float, max_attempts: int
) -> PartClaim:
    """Claims part `index` of a job in its parallel stage `stage` for this process, or says why
    not (see PartClaim). Commits."""
    now = utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    job_running = exists().where(
        Job.id == job_id,
        Job.state == JobState.RUNNING,
        Job.stage == stage,
        Job.cancel_requested.is_(False),
    )
    result = session.execute(
        update(JobPart)
        .where(
            JobPart.job_id == job_id,
            JobPart.part == index,
            JobPart.attempts < max_attempts,
            or_(
                JobPart.state == LaneState.QUEUED,
                and_(JobPart.state == LaneState.RUNNING, JobPart.heartbeat_at < stale),
            ),
            job_running,
        )
        .values(
            state=LaneState.RUNNING,
            attempts=JobPart.attempts + 1,
            worker=host_pid(),
            heartbeat_at=now,
            started_at=now,
            error=None,
            progress={"requests": 0, "blocks": 0},
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return PartClaim.CLAIMED
    row = session.get(JobPart, (job_id, index))
    job = session.get(Job, job_id)
    session.rollback()
    if row is None or job is None or job.state != JobState.RUNNING or job.cancel_requested:
        return PartClaim.STOPPED
    if row.state == LaneState.SUCCEEDED:
        return PartClaim.DONE
    if row.attempts >= max_attempts:
        return PartClaim.EXHAUSTED
    return PartClaim.BUSY


def part_pending(session: Session, job_id: str, index: int, stale_after_s: float) -> bool:
    """Part `index` is queued, or running with a fresh heartbeat (someone will finish it)."""
    stale = utcnow() - timedelta(seconds=stale_after_s)
    pending = session.scalar(
        select(JobPart.part).where(
            JobPart.job_id == job_id,
            JobPart.part == index,
            or_(
                JobPart.state == LaneState.QUEUED,
                and_(JobPart.state == LaneState.RUNNING, JobPart.heartbeat_at >= stale),
            ),
        )
    )
    session.rollback()  # end the read transaction
    return pending is not None


def claimed_attempt(session: Session, job_id: str, index: int) -> int:
    """The attempt number this process holds after a CLAIMED claim_part: its fence. A worker
    whose part was taken over (stale heartbeat) no longer matches it and can write nothing."""
    attempts = session.scalar(select(JobPart.attempts).where(JobPart.job_id == job_id, JobPart.part == index))
    session.rollback()  # end the read transaction
    assert attempts is not None
    return int(attempts)


def heartbeat_part(session: Session, job_id: str, index: int, attempt: int, **values: Any) -> bool:
    """Records progress of the holder of `attempt`; False when another worker took the part over."""
    result = session.execute(
        update(JobPart)
        .where(JobPart.job_id == job_id, JobPart.part == index, JobPart.attempts == attempt)
        .values(heartbeat_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def finish_part(session: Session, job_id: str, index: int, attempt: int, state: LaneState, **values: Any) -> bool:
    """Ends the part as the holder of `attempt`; False (nothing written) when another worker took
    it over, so a late worker never overwrites the outcome of the one that replaced it."""
    result = session.execute(
        update(JobPart)
        .where(JobPart.job_id == job_id, JobPart.part == index, JobPart.attempts == attempt)
        .values(state=state, finished_at=utcnow(), heartbeat_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def try_start_merge(session: Session, job_id: str, stage: Stage, *, now: datetime | None = None) -> bool:
    """True for exactly one caller, once every part of the job's parallel stage `stage` has
    succeeded; that caller sends the merge (at `now`, its heartbeat until a worker claims it).
    Commits."""
    pending = exists().where(JobPart.job_id == job_id, JobPart.state != LaneState.SUCCEEDED)
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.stage == stage, ~pending)
        .values(stage=Stage.MERGE, heartbeat_at=now or utcnow(), attempts=0)  # unclaimed: 0
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]
