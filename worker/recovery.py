"""The sweep: finds work whose message or worker was lost and hands it out again.

Job rows and lane rows carry heartbeats. A stage whose heartbeat went stale (worker killed,
broker restarted and lost its messages) is enqueued again; the claim protocol in
worker.jobs.state makes duplicates harmless. Work that keeps failing gives up after
task_max_attempts with a clear reason, so no job stays "running" forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, LaneRun, SweepRun, WindowLane, utcnow
from litehit.db.states import JobState, LaneState, Stage
from litehit.settings import Settings
from litehit.storage import Storage
from worker.jobs.state import Part, fail_job, part_key
from worker.jobs.submit import (
    FIRST_TASK,
    LANE_TASK,
    MERGE_TASK,
    PARSE_TASK,
    QUERY_TASK,
    SWEEP_KIND,
    SWEEP_MERGE_TASK,
    SWEEP_PARSE_TASK,
    SWEEP_RUN_TASK,
    WINDOW_KIND,
    WINDOW_LANE_TASK,
    WINDOW_MERGE_TASK,
    WINDOW_PARSE_TASK,
    Enqueue,
)

__all__ = ["sweep"]

log = logging.getLogger(__name__)

STAGE_TASK = {
    ("replay", Stage.PARSE): PARSE_TASK,
    ("replay", Stage.MERGE): MERGE_TASK,
    ("query", Stage.QUERY): QUERY_TASK,
    (SWEEP_KIND, Stage.PARSE): SWEEP_PARSE_TASK,
    (SWEEP_KIND, Stage.MERGE): SWEEP_MERGE_TASK,
    (WINDOW_KIND, Stage.PARSE): WINDOW_PARSE_TASK,
    (WINDOW_KIND, Stage.MERGE): WINDOW_MERGE_TASK,
}
# The parallel stages: their rows, the stage and the task of one part.
PARTS: tuple[tuple[Part, Stage, str], ...] = (
    (LaneRun, Stage.LANES, LANE_TASK),
    (SweepRun, Stage.SIMULATE, SWEEP_RUN_TASK),
    (WindowLane, Stage.SIZE, WINDOW_LANE_TASK),
)


def sweep(session: Session, settings: Settings, enqueue: Enqueue) -> list[str]:
    """One pass; returns what it did (for logs and tests). Safe to run from several processes."""
    now = utcnow()
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

    for job in session.scalars(select(Job).where(Job.state == JobState.QUEUED, Job.cancel_requested.is_(True))):
        if fail_job(session, job.id, "cancelled before it started", state=JobState.CANCELLED):
            actions.append(f"cancelled {job.id}")
    # Queued jobs whose message may be lost: enqueue again (heartbeat_at = last enqueue).
    for job in session.scalars(
        select(Job).where(Job.state == JobState.QUEUED, or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale))
    ):
        if send(FIRST_TASK[job.kind], job.id):
            session.execute(update(Job).where(Job.id == job.id).values(heartbeat_at=now))
            actions.append(f"requeued {job.id}")
    session.commit()
    running = select(Job).where(
        Job.state == JobState.RUNNING, or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale)
    )
    for job in session.scalars(running).all():
        stage_task = STAGE_TASK.get((job.kind, job.stage))
        if stage_task is None:
            continue
        if job.attempts >= settings.task_max_attempts:
            if fail_job(session, job.id, f"worker lost during {job.stage} after {job.attempts} attempts"):
                storage.remove_work(job.id)
                actions.append(f"gave up {job.id}")
        elif send(stage_task, job.id):
            actions.append(f"retried {job.stage} of {job.id}")
    for model, stage, task in PARTS:
        actions += _resend_parts(session, settings, storage, model, stage, task, send, now, stale)
    session.commit()
    actions += [f"removed unfinished upload {p}" for p in storage.remove_orphan_parts(settings.upload_part_grace_s)]
    return actions


def _resend_parts(
    session: Session,
    settings: Settings,
    storage: Storage,
    model: Part,
    stage: Stage,
    task: str,
    send: Callable[..., bool],
    now: datetime,
    stale: datetime,
) -> list[str]:
    """Parts of a parallel stage whose worker went silent, or that wait while their job's
    heartbeat is stale (the message may be lost), are sent again; a part that used up its
    attempts ends the job."""
    actions: list[str] = []
    key = part_key(model)
    name = "simulation" if model is SweepRun else "lane"
    parts = (
        select(model, Job)
        .join(Job)
        .where(
            Job.state == JobState.RUNNING,
            Job.stage == stage,
            or_(
                (model.state == LaneState.RUNNING) & or_(model.heartbeat_at.is_(None), model.heartbeat_at < stale),
                (model.state == LaneState.QUEUED) & or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
            ),
        )
        .order_by(key)
    )
    for found, job in session.execute(parts).all():
        assert isinstance(found, LaneRun | SweepRun | WindowLane)
        part = found
        index = part.run if isinstance(part, SweepRun) else part.lane
        label = str(index) if isinstance(part, SweepRun) else part.instance_id
        if part.state == LaneState.QUEUED:  # throttle: waiting parts are sent again at most once per stale period
            session.execute(update(Job).where(Job.id == job.id).values(heartbeat_at=now))
        if part.attempts >= settings.task_max_attempts:
            reason = f"{name} {label}: gave up after {part.attempts} attempts (worker lost?)"
            if fail_job(session, job.id, reason):
                storage.remove_work(job.id)
                actions.append(f"gave up {job.id}")
        elif send(task, job.id, index):
            actions.append(f"retried {name} {index} of {job.id}")
    return actions
