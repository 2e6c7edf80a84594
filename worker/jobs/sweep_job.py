"""Policy-sweep jobs of the service: parse once -> one task per simulation (lane x policy x
capacity), spread over every worker -> merge into policies.json and a plot.

The job's spec is ``{"config": <replay config>, "sweep": <SweepOptions>}``; each simulation is
a SweepRun row that holds its result once done, so the merge reads SQL, not files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, object_session

from litehit.db.models import Job, SweepRun, utcnow
from litehit.db.states import LaneState, Stage
from litehit.errors import ReplayCancelled
from litehit.policies.options import SweepOptions, capacity_gib, check_sweepable, lane_capacity_blocks
from litehit.policies.plot import plot_sweep
from litehit.policies.result import LruCheck, PolicyResult, PolicySweepResult, WaLane
from litehit.policies.runs import LruComparison, PolicyRun, RunKey
from litehit.policies.sweep import assemble_result, run_keys
from litehit.replay.plan import ReplayPlan, make_plan
from litehit.replay.staged import iter_lane_work, read_manifest
from litehit.settings import Settings
from litehit.spec import ReplaySpec, TraceFormat
from litehit.storage import SWEEP_PLOT_FILE, SWEEP_RESULT_FILE, Storage
from worker.jobs.merge_task import Merged, run_publish_merge
from worker.jobs.parse import parse_job_trace, runtime_spec
from worker.jobs.part_task import run_part
from worker.jobs.state import (
    heartbeat_part,
    job_should_stop,
)
from worker.jobs.submit import SWEEP_MERGE_TASK, SWEEP_RUN_TASK, Enqueue
from worker.jobs.throttle import Throttle

__all__ = ["run_sweep_merge", "run_sweep_parse", "run_sweep_run", "sweep_result"]


def _spec(job: Job, storage: Storage) -> ReplaySpec:
    spec = runtime_spec(job.spec["config"], job.id, storage)
    check_sweepable(spec)
    return spec


def _plan(spec: ReplaySpec, work: Path) -> tuple[ReplayPlan, int]:
    """The plan of the parsed trace (its format and categories) and its number of chunks."""
    manifest = read_manifest(work)
    plan = make_plan(spec, TraceFormat(manifest.trace_format))
    for name in manifest.categories:
        plan.categories.id_of(name)
    return plan, manifest.chunks


def run_sweep_parse(session: Session, settings: Settings, job_id: str, enqueue: Enqueue) -> str:
    """Stage 1: parse the trace once; then one task per simulation."""
    parsed = parse_job_trace(session, settings, job_id, _spec)
    if isinstance(parsed, str):
        return parsed
    job, spec = parsed.job, parsed.spec
    options = SweepOptions.model_validate(job.spec["sweep"])
    plan = make_plan(spec, TraceFormat(parsed.manifest.trace_format))
    keys = run_keys(plan, options)
    session.execute(delete(SweepRun).where(SweepRun.job_id == job_id))
    for i, key in enumerate(keys):
        lane = plan.lanes[key.lane]
        blocks = lane_capacity_blocks(key.capacity, lane.block_bytes, lane.block_size)
        session.add(
            SweepRun(
                job_id=job_id,
                run=i,
                lane=key.lane,
                instance_id=lane.instance_id,
                policy=key.policy,
                slot=options.capacity_gb.index(key.capacity),
                capacity_gb=capacity_gib(key.capacity, blocks, lane.block_bytes),
                capacity_blocks=blocks,
                state=LaneState.QUEUED,
                details={},
            )
        )
    job.stage = Stage.SIMULATE
    job.heartbeat_at = utcnow()
    job.progress = {"stage": Stage.SIMULATE, "runs": len(keys)}
    session.commit()
    for i in range(len(keys)):
        enqueue(SWEEP_RUN_TASK, job_id, i)
    return "parsed"


def run_sweep_run(session: Session, settings: Settings, job_id: str, run: int, enqueue: Enqueue) -> str:
    """Stage 2 (one per simulation, in parallel): one lane under one policy at one capacity."""
    return run_part(
        session,
        settings,
        SweepRun,
        job_id,
        run,
        enqueue,
        SWEEP_MERGE_TASK,
        noun="simulation",
        describe=lambda row: f"{row.policy} at {row.capacity_gb:g} GiB on lane {row.instance_id}",
        work=lambda job, row, attempt: _simulate(session, settings, job, row, attempt),
    )


def _simulate(session: Session, settings: Settings, job: Job, row: SweepRun, attempt: int) -> dict[str, Any]:
    storage = Storage(settings.storage)
    throttle, stop_throttle = Throttle(settings.heartbeat_s), Throttle(settings.heartbeat_s)
    options = SweepOptions.model_validate(job.spec["sweep"])
    spec = runtime_spec(job.spec["config"], job.id, storage)
    work = storage.work_dir(job.id)
    plan, chunks = _plan(spec, work)
    lane = plan.lanes[row.lane]
    sim = PolicyRun(RunKey(row.lane, row.policy, options.capacity_gb[row.slot]), lane, options)
    check = LruComparison(lane, [sim]) if options.verify_lru and row.policy == "lru" else None
    try:
        for chunk in iter_lane_work(work, row.lane, chunks):
            if stop_throttle.due() and job_should_stop(session, job.id):
                raise ReplayCancelled("policy sweep cancelled; nothing published")
            sim.feed(chunk)
            if check is not None:
                check.check(chunk)
            if throttle.due():
                heartbeat_part(session, SweepRun, job.id, row.run, attempt, requests=sim.requests)
        result = sim.result()
        details: dict[str, object] = {}
        if row.policy == "wa":
            details["wa"] = sim.wa_state(plan.categories.names).model_dump(mode="json")
        if check is not None:
            details["lru_check"] = check.tally().model_dump(mode="json")
    finally:
        sim.close()
        if check is not None:
            check.close()
    return {
        "requests": result.requests,
        "hit_blocks": result.hit_blocks,
        "hit_tokens": result.hit_tokens,
        "input_tokens": result.input_tokens,
        "hit_ratio": result.hit_ratio,
        "evictions": result.evictions,
        "details": details,
    }


def sweep_result(spec: ReplaySpec, options: SweepOptions, rows: list[SweepRun], fmt: TraceFormat) -> PolicySweepResult:
    """policies.json from the simulations' rows (the same assembly as the CLI's)."""
    plan = make_plan(spec, fmt)
    results: dict[RunKey, PolicyResult] = {}
    wa: dict[int, WaLane] = {}
    checks: dict[int, LruCheck] = {}
    for row in rows:
        key = RunKey(row.lane, row.policy, options.capacity_gb[row.slot])
        results[key] = PolicyResult(
            policy=row.policy,
            capacity_gb=row.capacity_gb,
            capacity=key.capacity if isinstance(key.capacity, str) else None,
            capacity_blocks=row.capacity_blocks,
            requests=row.requests,
            hit_blocks=row.hit_blocks,
            hit_tokens=row.hit_tokens,
            input_tokens=row.input_tokens,
            hit_ratio=row.hit_ratio or 0.0,
            evictions=row.evictions,
        )
        if "wa" in row.details and row.lane not in wa:
            wa[row.lane] = WaLane.model_validate(row.details["wa"])
        if "lru_check" in row.details:
            part = LruCheck.model_validate(row.details["lru_check"])
            total = checks.get(row.lane, LruCheck(comparisons=0, equal=0, facts_lower=0))
            checks[row.lane] = LruCheck(
                comparisons=total.comparisons + part.comparisons,
                equal=total.equal + part.equal,
                facts_lower=total.facts_lower + part.facts_lower,
            )
    return assemble_result(plan.lanes, options, results, wa, checks)


def run_sweep_merge(session: Session, settings: Settings, job_id: str) -> str:
    """Stage 3: policies.json and its plot from the rows, published atomically."""
    return run_publish_merge(session, settings, job_id, SWEEP_RESULT_FILE, SWEEP_PLOT_FILE, _merge_sweep)


def _merge_sweep(job: Job, storage: Storage) -> Merged:
    session = object_session(job)
    assert session is not None
    options = SweepOptions.model_validate(job.spec["sweep"])
    spec = runtime_spec(job.spec["config"], job.id, storage)
    manifest = read_manifest(storage.work_dir(job.id))
    rows = list(session.scalars(select(SweepRun).where(SweepRun.job_id == job.id).order_by(SweepRun.run)))
    result = sweep_result(spec, options, rows, TraceFormat(manifest.trace_format))
    stats = {"runs": len(rows), "lanes": len(result.lanes), "wa_life_s": result.wa.life_s}
    return Merged(result.json_bytes(), lambda path: plot_sweep(result, path), stats)
