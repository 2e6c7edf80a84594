"""Window-sizing jobs of the service: parse once -> one task per lane, each simulating the lane
at the sizing's capacity, spread over every worker -> merge into window.json and a plot.

The job's spec is ``{"config": <replay config>, "window": <WindowOptions>}``; each lane is a
WindowLane row that holds the lane's summary and its entry of window.json once done, so the
merge reads SQL. The report over all lanes needs every evicted miss's delay: each lane task also
publishes its sorted delays (int64 ns) in the job's work folder, which the merge reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, object_session

from litehit.db.models import Job, WindowLane, utcnow
from litehit.db.states import LaneState, Stage
from litehit.errors import ReplayCancelled
from litehit.policies.options import check_sweepable, lane_capacity_blocks
from litehit.publish import AtomicPublisher
from litehit.replay.plan import make_plan
from litehit.replay.staged import iter_lane_work, read_manifest
from litehit.settings import Settings
from litehit.spec import ReplaySpec, TraceFormat
from litehit.storage import WINDOW_PLOT_FILE, WINDOW_RESULT_FILE, Storage
from litehit.window.delays import miss_report
from litehit.window.options import WindowOptions
from litehit.window.plot import plot_window
from litehit.window.result import LaneWindow, MissReport, Outcomes, WindowResult, WindowSettings
from litehit.window.runs import WindowRun
from worker.jobs.merge_task import Merged, run_publish_merge
from worker.jobs.parse import parse_job_trace, runtime_spec
from worker.jobs.part_task import run_part
from worker.jobs.state import (
    heartbeat_part,
    job_should_stop,
)
from worker.jobs.submit import WINDOW_LANE_TASK, WINDOW_MERGE_TASK, Enqueue
from worker.jobs.throttle import Throttle

__all__ = ["overall_report", "run_window_lane", "run_window_merge", "run_window_parse", "window_result"]


def _spec(job: Job, storage: Storage) -> ReplaySpec:
    spec = runtime_spec(job.spec["config"], job.id, storage)
    check_sweepable(spec)
    return spec


def _delays_path(work: Path, lane: int) -> Path:
    return work / f"window-delays-{lane}.i64"


def run_window_parse(session: Session, settings: Settings, job_id: str, enqueue: Enqueue) -> str:
    """Stage 1: parse the trace once; then one task per lane."""
    parsed = parse_job_trace(session, settings, job_id, _spec)
    if isinstance(parsed, str):
        return parsed
    job, spec = parsed.job, parsed.spec
    options = WindowOptions.model_validate(job.spec["window"])
    plan = make_plan(spec, TraceFormat(parsed.manifest.trace_format))
    session.execute(delete(WindowLane).where(WindowLane.job_id == job_id))
    for i, lane in enumerate(plan.lanes):
        blocks = lane_capacity_blocks(options.capacity_gb, lane.block_bytes, lane.block_size)
        session.add(
            WindowLane(
                job_id=job_id,
                lane=i,
                instance_id=lane.instance_id,
                capacity_blocks=blocks,
                state=LaneState.QUEUED,
                result={},
            )
        )
    job.stage = Stage.SIZE
    job.heartbeat_at = utcnow()
    job.progress = {"stage": Stage.SIZE, "lanes": len(plan.lanes)}
    session.commit()
    for i in range(len(plan.lanes)):
        enqueue(WINDOW_LANE_TASK, job_id, i)
    return "parsed"


def _size_lane(
    session: Session, storage: Storage, job: Job, index: int, attempt: int, heartbeat_s: float
) -> LaneWindow:
    """Simulates one lane from the parsed trace; publishes its sorted delays in the work folder."""
    options = WindowOptions.model_validate(job.spec["window"])
    spec = runtime_spec(job.spec["config"], job.id, storage)
    work = storage.work_dir(job.id)
    manifest = read_manifest(work)
    plan = make_plan(spec, TraceFormat(manifest.trace_format))
    for name in manifest.categories:
        plan.categories.id_of(name)
    throttle, stop_throttle = Throttle(heartbeat_s), Throttle(heartbeat_s)
    run = WindowRun(plan.lanes[index], options)
    requests = 0
    try:
        for chunk in iter_lane_work(work, index, manifest.chunks):
            if stop_throttle.due() and job_should_stop(session, job.id):
                raise ReplayCancelled("window sizing cancelled; nothing published")
            run.feed(chunk)
            requests += chunk.requests
            if throttle.due():
                heartbeat_part(session, WindowLane, job.id, index, attempt, requests=requests)
        lane = run.result(plan.categories.names)
        delays, _, _ = run.sample.sorted_delays()
    finally:
        run.close()
    with AtomicPublisher(_delays_path(work, index)) as publisher:
        publisher.write(delays.astype("<i8").tobytes())
        publisher.commit()
    return lane


def run_window_lane(session: Session, settings: Settings, job_id: str, index: int, enqueue: Enqueue) -> str:
    """Stage 2 (one per lane, in parallel): the lane at the sizing's capacity under its policy."""
    return run_part(
        session,
        settings,
        WindowLane,
        job_id,
        index,
        enqueue,
        WINDOW_MERGE_TASK,
        noun="lane",
        describe=lambda row: f"lane {row.instance_id}",
        work=lambda job, row, attempt: _lane_values(
            _size_lane(session, Storage(settings.storage), job, index, attempt, settings.heartbeat_s)
        ),
    )


def _lane_values(lane: LaneWindow) -> dict[str, Any]:
    d = lane.delay_s
    return {
        "requests": lane.requests,
        "evictions": lane.evictions,
        "evicted": lane.outcomes.evicted,
        "no_match": lane.outcomes.no_match,
        "delay_count": d.count,
        "delay_p50": d.p50,
        "delay_p90": d.p90,
        "delay_p99": d.p99,
        "delay_p999": d.p999,
        "delay_max": d.max,
        "window_s": lane.window_s,
        "peak_evictions_per_s": lane.peak_evictions_per_s,
        "memory_bytes": lane.memory_bytes,
        "result": lane.model_dump(mode="json"),
    }


def overall_report(lanes: list[LaneWindow], delays: list[np.ndarray], target: float) -> MissReport:
    """The report over every lane's misses, from the lanes' counts and their sorted delays (ns):
    what run_window_sizing computes from all the lanes' samples together."""
    everything = np.sort(np.concatenate([np.empty(0, dtype=np.int64), *delays]))
    outcomes = Outcomes(
        evicted=sum(lane.outcomes.evicted for lane in lanes),
        no_match=sum(lane.outcomes.no_match for lane in lanes),
    )
    return miss_report(sum(lane.requests for lane in lanes), outcomes, everything, target)


def window_result(options: WindowOptions, rows: list[WindowLane], work: Path) -> WindowResult:
    """window.json from the lanes' rows and delay files (the same document as the CLI's)."""
    lanes = [LaneWindow.model_validate(row.result) for row in rows]
    delays = [np.fromfile(_delays_path(work, row.lane), dtype="<i8").astype(np.int64) for row in rows]
    settings = WindowSettings(
        policy=options.policy,
        capacity_gb=options.capacity_gb,
        coverage_target=options.coverage,
        entry_bytes=options.entry_bytes,
        load_factor=options.load_factor,
        bucket_s=options.bucket_seconds,
    )
    return WindowResult(settings=settings, lanes=lanes, overall=overall_report(lanes, delays, options.coverage))


def run_window_merge(session: Session, settings: Settings, job_id: str) -> str:
    """Stage 3: window.json and its plot from the rows, published atomically."""
    return run_publish_merge(session, settings, job_id, WINDOW_RESULT_FILE, WINDOW_PLOT_FILE, _merge_window)


def _merge_window(job: Job, storage: Storage) -> Merged:
    session = object_session(job)
    assert session is not None
    options = WindowOptions.model_validate(job.spec["window"])
    query = select(WindowLane).where(WindowLane.job_id == job.id).order_by(WindowLane.lane)
    rows = list(session.scalars(query))
    result = window_result(options, rows, storage.work_dir(job.id))
    stats = {"lanes": len(rows), "window_s": result.overall.window_s}
    return Merged(result.json_bytes(), lambda path: plot_window(result, path), stats)
