"""The sweep: finds work whose message or worker was lost and hands it out again.

Job rows and lane rows carry heartbeats. A stage whose heartbeat went stale (worker killed,
broker restarted and lost its messages) is enqueued again; the claim protocol in
worker.jobs.state makes duplicates harmless. Work that keeps failing gives up after
task_max_attempts with a clear reason, so no job stays "running" forever.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from litehit.db.models import Job, LaneRun, utcnow
from litehit.db.states import JobState, LaneState, Stage
from litehit.settings import Settings
from litehit.storage import Storage
from worker.jobs.state import fail_job
from worker.jobs.submit import LANE_TASK, MERGE_TASK, PARSE_TASK, QUERY_TASK, Enqueue

__all__ = ["sweep"]

log = logging.getLogger(__name__)

STAGE_TASK = {
    ("replay", Stage.PARSE): PARSE_TASK,
    ("replay", Stage.MERGE): MERGE_TASK,
    ("query", Stage.QUERY): QUERY_TASK,
}


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
        task = PARSE_TASK if job.kind == "replay" else QUERY_TASK
        if send(task, job.id):
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
    lanes = (
        select(LaneRun, Job)
        .join(Job)
        .where(
            Job.state == JobState.RUNNING,
            Job.stage == Stage.LANES,
            or_(
                (LaneRun.state == LaneState.RUNNING)
                & or_(LaneRun.heartbeat_at.is_(None), LaneRun.heartbeat_at < stale),
                (LaneRun.state == LaneState.QUEUED) & or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < stale),
            ),
        )
    )
    for lane, job in session.execute(lanes).all():
        if lane.state == LaneState.QUEUED:  # throttle: waiting lanes are sent again at most once per stale period
            session.execute(update(Job).where(Job.id == job.id).values(heartbeat_at=now))
        if lane.attempts >= settings.task_max_attempts:
            reason = f"lane {lane.instance_id}: gave up after {lane.attempts} attempts (worker lost?)"
            if fail_job(session, job.id, reason):
                storage.remove_work(job.id)
                actions.append(f"gave up {job.id}")
        elif send(LANE_TASK, job.id, lane.lane):
            actions.append(f"retried lane {lane.lane} of {job.id}")
    session.commit()
    return actions
