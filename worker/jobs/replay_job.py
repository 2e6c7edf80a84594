"""Replay jobs of the service: submit, then parse once -> one task per lane -> merge + publish.

Every function takes ids, reads the job row, does its stage through litehit.replay.staged and
records the outcome on the row. ``enqueue(task_name, *args)`` is passed in (Celery in the
service, a direct call in tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from litehit.db.models import Job, LaneRun, utcnow
from litehit.db.states import LaneState, Stage
from litehit.replay.runner import FACTS_FILE
from litehit.replay.staged import lane_stage, merge_stage, read_manifest
from litehit.settings import Settings
from litehit.storage import Storage
from worker.errors import TRANSIENT
from worker.jobs.parse import parse_job_trace, runtime_spec
from worker.jobs.part_task import run_part
from worker.jobs.state import (
    claim_job_stage,
    fail_job_from,
    heartbeat_part,
    job_should_stop,
    succeed_job,
)
from worker.jobs.submit import LANE_TASK, MERGE_TASK, Enqueue
from worker.jobs.throttle import Throttle

__all__ = ["run_lane", "run_merge", "run_parse"]


def run_parse(session: Session, settings: Settings, job_id: str, enqueue: Enqueue) -> str:
    """Stage 1: scan, validate, route and normalize the trace once; then one task per lane."""
    parsed = parse_job_trace(session, settings, job_id, lambda job, storage: runtime_spec(job.spec, job.id, storage))
    if isinstance(parsed, str):
        return parsed
    job, spec, manifest = parsed.job, parsed.spec, parsed.manifest
    session.execute(delete(LaneRun).where(LaneRun.job_id == job_id))
    for i, inst in enumerate(spec.instances):
        session.add(
            LaneRun(
                job_id=job_id,
                lane=i,
                instance_id=inst.instance_id,
                state=LaneState.QUEUED,
                requests_total=manifest.lane_requests[i],
                blocks_total=manifest.lane_blocks[i],
            )
        )
    job.stage = Stage.LANES
    job.heartbeat_at = utcnow()
    job.progress = {"stage": Stage.LANES, "lines": manifest.lines, "reads": manifest.reads, "blocks": manifest.blocks}
    session.commit()
    for i in range(len(spec.instances)):
        enqueue(LANE_TASK, job_id, i)
    return "parsed"


def run_lane(session: Session, settings: Settings, job_id: str, lane: int, enqueue: Enqueue) -> str:
    """Stage 2 (one per lane, in parallel): replay one lane's requests in order."""
    return run_part(
        session,
        settings,
        LaneRun,
        job_id,
        lane,
        enqueue,
        MERGE_TASK,
        noun="lane",
        describe=lambda row: f"lane {row.instance_id}",
        work=lambda job, row, attempt: _replay_lane(session, settings, job, lane, attempt),
    )


def _replay_lane(session: Session, settings: Settings, job: Job, lane: int, attempt: int) -> dict[str, Any]:
    storage = Storage(settings.storage)
    throttle, stop_throttle = Throttle(settings.heartbeat_s), Throttle(settings.heartbeat_s)

    def progress(requests: int, blocks: int) -> None:
        if throttle.due():
            heartbeat_part(session, LaneRun, job.id, lane, attempt, requests=requests, blocks=blocks)

    def should_stop() -> bool:
        return stop_throttle.due() and job_should_stop(session, job.id)

    stats = lane_stage(
        runtime_spec(job.spec, job.id, storage),
        storage.work_dir(job.id),
        lane,
        on_progress=progress,
        should_stop=should_stop,
    )
    return {
        "requests": stats.requests,
        "blocks": stats.blocks,
        "unique_blocks": stats.unique_blocks,
        "memory_bytes": stats.memory_bytes,
        "expired_blocks": stats.expired_blocks,
    }


def run_merge(session: Session, settings: Settings, job_id: str) -> str:
    """Stage 3: merge the lanes in input order and publish litehit_facts.csv atomically."""
    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    try:
        spec = runtime_spec(job.spec, job.id, storage)
        Path(spec.output_result_path).mkdir(parents=True, exist_ok=True)
        result = merge_stage(spec, storage.work_dir(job_id))
        manifest = read_manifest(storage.work_dir(job_id))
    except TRANSIENT:
        raise
    except Exception as exc:
        fail_job_from(session, storage, job_id, exc)
        return "failed"
    job = session.get(Job, job_id)
    assert job is not None
    lanes = [
        {
            "instance_id": r.instance_id,
            "requests": r.requests,
            "blocks": r.blocks,
            "unique_blocks": r.unique_blocks,
            "memory_bytes": r.memory_bytes,
            "expired_blocks": r.expired_blocks,
        }
        for r in job.lanes
    ]
    stats: dict[str, Any] = {
        **job.stats,
        "facts_rows": result.facts_rows,
        "lanes": lanes,
        "engine_memory_bytes": sum(r["memory_bytes"] or 0 for r in lanes),
        "unique_blocks": sum(r["unique_blocks"] or 0 for r in lanes),
        "trace_format": manifest.trace_format,
    }
    output = storage.relative(Path(spec.output_result_path) / FACTS_FILE)
    progress = {**job.progress, "stage": Stage.DONE}
    if not succeed_job(session, job_id, stats=stats, output_path=output, progress=progress):
        return "skipped"  # it ended while merging (cancelled): its state stays
    storage.remove_work(job_id)
    return "succeeded"
