"""The sweep: finds work whose message or worker was lost and hands it out again.

Job rows and part rows carry heartbeats. A stage whose heartbeat went stale (worker killed,
broker restarted and lost its messages) is enqueued again; the claim protocol in
litehit.jobs.state makes duplicates harmless. Which task takes which stage of which kind comes
from the registry (litehit.jobs.registry). Work that keeps failing gives up after
task_max_attempts with a clear reason, and a cancelled job whose workers died ends cancelled, so
no job stays "running" forever.

Nothing is sent again on every pass: a queued job's message may just wait behind others, so each
re-send doubles the wait before the next one (_queued_due); the lost work of a running job is
sent again at most once per stale period, and the time of that re-send is recorded on the job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, JobPart, utcnow
from litehit.db.states import JobState, LaneState
from litehit.jobs.base import JobKind, TraceKind
from litehit.jobs.registry import job_kind, trace_kinds
from litehit.jobs.state import RESENT_AT, end_cancelled, fail_job, try_start_merge
from litehit.jobs.submit import Enqueue
from litehit.settings import Settings
from litehit.storage import Storage

__all__ = ["sweep"]

log = logging.getLogger(__name__)


def _kind_of(name: str) -> JobKind[Any] | None:
    try:
        return job_kind(name)
    except ValueError:  # a kind this version does not know (a row of a newer version): left alone
        return None


RESEND_BACKOFF_CAP = 10
"""A queued job is sent again at least every RESEND_BACKOFF_CAP x stale_after_s."""


def sweep(session: Session, settings: Settings, enqueue: Enqueue, *, now: datetime | None = None) -> list[str]:
    """One pass; returns what it did (for logs and tests). Safe to run from several processes.
    `now` is the sweep's clock (tests pass one in)."""
    now = now or utcnow()
    stale = now - timedelta(seconds=settings.stale_after_s)
    storage = Storage(settings.storage)
    actions: list[str] = []

    def send(task: str, *args: object) -> bool:
        try:
            enqueue(task, *args)
            return True
        except Exception as exc:  # broker down: try again next sweep
            log.warning("sweep could not enqueue %s%s: %s", task, args, exc)
            return False

    queued = select(Job.id).where(Job.state == JobState.QUEUED, Job.cancel_requested.is_(True))
    for job_id in session.scalars(queued).all():
        if fail_job(session, job_id, "cancelled before it started", state=JobState.CANCELLED):
            actions.append(f"cancelled {job_id}")
    # Cancelled running jobs whose workers died: no claim takes them any more, so end them here.
    cancelled = select(Job.id).where(Job.state == JobState.RUNNING, Job.cancel_requested.is_(True))
    for job_id in session.scalars(cancelled).all():
        if end_cancelled(session, job_id, settings.stale_after_s, now=now):
            storage.remove_work(job_id)
            actions.append(f"cancelled {job_id}")
    # Queued jobs whose message may be lost: enqueue again (heartbeat_at = last enqueue).
    waiting = select(Job.id, Job.kind, Job.heartbeat_at, Job.created_at).where(
        Job.state == JobState.QUEUED,
        Job.cancel_requested.is_(False),
        or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
    )
    for job_id, name, last, created in session.execute(waiting).all():
        kind = _kind_of(name)
        if kind is None:
            continue
        if not _queued_due(last, created, now, settings.stale_after_s) or not _stamp(session, job_id, last, now):
            continue
        if send(kind.first_task, job_id):
            actions.append(f"requeued {job_id}")
        else:
            _unstamp(session, job_id, last, now)
    actions += _resend_stages(session, settings, storage, send, now, stale)
    for trace_kind in trace_kinds():
        actions += _resend_parts(session, settings, storage, trace_kind, send, now, stale)
    session.commit()
    actions += [f"removed unfinished upload {p}" for p in storage.remove_orphan_parts(settings.upload_part_grace_s)]
    return actions


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes (UTC), PostgreSQL aware ones."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _queued_due(last: datetime | None, created: datetime, now: datetime, stale_after_s: float) -> bool:
    """Whether a queued job is sent again now: its last send is older than the time it had
    waited before that send (at least stale_after_s, at most RESEND_BACKOFF_CAP x stale_after_s).
    So k jobs waiting T behind busy workers get O(k log T) copies, not one each per stale period
    (which once grew the queue to 4,673 messages for ~210 waiting jobs). A job never sent (the broker was
    down when it was submitted) is sent once it is stale_after_s old: not while the API that
    committed it is about to send it."""
    if last is None:
        return (now - _aware(created)).total_seconds() > stale_after_s
    waited_before = (_aware(last) - _aware(created)).total_seconds()
    interval = min(max(stale_after_s, waited_before), RESEND_BACKOFF_CAP * stale_after_s)
    return (now - _aware(last)).total_seconds() > interval


def _stamp(session: Session, job_id: str, last: datetime | None, now: datetime) -> bool:
    """Sets the job's heartbeat_at (its last send) to now unless it changed since it read
    `last` (another sweeper sent the work, or a worker claimed it). Commits. True when stamped."""
    unchanged = Job.heartbeat_at.is_(None) if last is None else Job.heartbeat_at == last
    stamped = session.execute(
        update(Job)
        .where(Job.id == job_id, unchanged)
        .values(heartbeat_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(stamped.rowcount == 1)  # type: ignore[attr-defined]


def _unstamp(session: Session, job_id: str, last: datetime | None, now: datetime) -> None:
    """Takes a stamp back: the broker refused the messages, the next sweep tries again."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.heartbeat_at == now)
        .values(heartbeat_at=last)
        .execution_options(synchronize_session=False)
    )
    session.commit()


def _resend_stages(
    session: Session,
    settings: Settings,
    storage: Storage,
    send: Callable[..., bool],
    now: datetime,
    stale: datetime,
) -> list[str]:
    """Running jobs whose holder of a one-task stage (parse, merge, query) went silent: the
    stage is sent again, at most once per stale period (its progress records "resent_at"; the
    heartbeat must stay stale for the next claim to take over), or the job ends once the stage
    used up its attempts."""
    actions: list[str] = []
    silent = select(Job.id, Job.kind, Job.stage, Job.attempts, Job.progress).where(
        Job.state == JobState.RUNNING,
        Job.cancel_requested.is_(False),
        or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
    )
    for job_id, name, stage, attempts, progress in session.execute(silent).all():
        kind = _kind_of(name)
        task = kind.stage_tasks().get(stage) if kind is not None else None
        if task is None:
            continue
        if attempts >= settings.task_max_attempts:
            if fail_job(session, job_id, f"worker lost during {stage} after {attempts} attempts"):
                storage.remove_work(job_id)
                actions.append(f"gave up {job_id}")
            continue
        progress = progress if isinstance(progress, dict) else {}
        if _resent_at(progress) >= stale or not send(task, job_id):
            continue
        session.execute(
            update(Job)
            .where(
                Job.id == job_id,
                Job.state == JobState.RUNNING,
                Job.stage == stage,
                or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),  # not claimed meanwhile
            )
            .values(progress={**progress, RESENT_AT: now.isoformat()})
            .execution_options(synchronize_session=False)
        )
        session.commit()
        actions.append(f"retried {stage} of {job_id}")
    return actions


def _resent_at(progress: dict[str, object]) -> datetime:
    """When the sweep last sent the job's stage again (long ago when never)."""
    text = progress.get(RESENT_AT)
    try:
        return _aware(datetime.fromisoformat(text)) if isinstance(text, str) else datetime.min.replace(tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _resend_parts(
    session: Session,
    settings: Settings,
    storage: Storage,
    kind: TraceKind[Any],
    send: Callable[..., bool],
    now: datetime,
    stale: datetime,
) -> list[str]:
    """Parts of a kind's parallel stage whose worker went silent, or that still wait (their
    message may be lost), are sent again, at most once per stale period per job: the job's
    heartbeat_at records the last re-send (nobody else heartbeats a job in its parallel stage).
    A part that used up its attempts ends the job."""
    actions: list[str] = []
    name, stage, task = kind.part_noun, kind.part_stage, kind.part_task_name
    lost = or_(
        (JobPart.state == LaneState.RUNNING) & or_(JobPart.heartbeat_at.is_(None), JobPart.heartbeat_at < stale),
        JobPart.state == LaneState.QUEUED,
    )
    jobs = select(Job.id, Job.heartbeat_at).where(
        Job.kind == kind.kind,
        Job.state == JobState.RUNNING,
        Job.stage == stage,
        Job.cancel_requested.is_(False),
        exists().where(JobPart.job_id == Job.id, lost),
    )
    for job_id, last in session.execute(jobs).all():
        rows = select(JobPart.part, JobPart.attempts, JobPart.label).where(JobPart.job_id == job_id, lost)
        parts = session.execute(rows.order_by(JobPart.part)).all()
        worn = next((p for p in parts if p.attempts >= settings.task_max_attempts), None)
        if worn is not None:
            if fail_job(session, job_id, f"{name} {worn.label}: gave up after {worn.attempts} attempts (worker lost?)"):
                storage.remove_work(job_id)
                actions.append(f"gave up {job_id}")
            continue
        if not parts or (last is not None and _aware(last) >= stale) or not _stamp(session, job_id, last, now):
            continue  # sent again less than a stale period ago (by this or another sweeper)
        sent = [index for index, _, _ in parts if send(task, job_id, index)]
        if not sent:
            _unstamp(session, job_id, last, now)
        actions += [f"retried {name} {index} of {job_id}" for index in sent]
    # Every part succeeded but the merge never started (the last part's worker died right after
    # finishing it): start it here. try_start_merge lets exactly one caller through.
    done = select(Job.id).where(
        Job.kind == kind.kind,
        Job.state == JobState.RUNNING,
        Job.stage == stage,
        Job.cancel_requested.is_(False),
        or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
        exists().where(JobPart.job_id == Job.id),
        ~exists().where(JobPart.job_id == Job.id, JobPart.state != LaneState.SUCCEEDED),
    )
    assert stage is not None
    for (job_id,) in session.execute(done).all():
        if try_start_merge(session, job_id, stage, now=now) and send(kind.task("merge"), job_id):
            actions.append(f"started the merge of {job_id}")
    return actions
