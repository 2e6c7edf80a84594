"""The in-process policy sweep (the CLI): one pass over the trace, every run advanced chunk by
chunk in parallel threads (the C simulator releases the GIL), optionally checked against the
exact lane core."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from litehit.policies.options import SweepOptions, check_sweepable
from litehit.policies.result import LaneSweep, LruCheck, PolicyResult, PolicySweepResult, WaLane, WaSettings
from litehit.policies.runs import LruComparison, PolicyRun, RunKey
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.plan import LaneSpec, ReplayPlan, make_plan
from litehit.spec import ReplaySpec

__all__ = ["assemble_result", "run_keys", "run_policy_sweep"]


def run_keys(plan: ReplayPlan, options: SweepOptions) -> list[RunKey]:
    """Every simulation of a sweep: lane-major, then policy, then capacity as asked."""
    return [
        RunKey(lane.index, policy, capacity)
        for lane in plan.lanes
        for policy in options.policies
        for capacity in options.capacity_gb
    ]


def run_policy_sweep(
    spec: ReplaySpec,
    options: SweepOptions,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PolicySweepResult:
    """Simulates every lane of the spec under every policy at every capacity, in one pass."""
    path = spec.trace_file_path
    check_sweepable(spec)
    plan = make_plan(spec, resolve_format(spec, path), path)
    runs = [PolicyRun(key, plan.lanes[key.lane], options) for key in run_keys(plan, options)]
    checks = (
        [
            LruComparison(lane, [r for r in runs if r.key.lane == lane.index and r.key.policy == "lru"])
            for lane in plan.lanes
        ]
        if options.verify_lru
        else []
    )
    try:
        with ThreadPoolExecutor(max_workers=max(1, spec.workers)) as pool:
            for chunk in TraceChunks(spec, plan, on_progress=on_progress, should_stop=should_stop):
                list(pool.map(PolicyRun.feed, runs, [chunk.lanes[run.key.lane] for run in runs]))
                for lane, check in enumerate(checks):
                    check.check(chunk.lanes[lane])
        results = {run.key: run.result() for run in runs}
        # WA learns the same at every capacity (its observations are trace level): one run per lane tells
        wa = {run.key.lane: run.wa_state(plan.categories.names) for run in runs if run.key.policy == "wa"}
        lru_checks = {lane: check.tally() for lane, check in enumerate(checks)}
    finally:
        for run in runs:
            run.close()
        for check in checks:
            check.close()
    return assemble_result(plan.lanes, options, results, wa, lru_checks)


def assemble_result(
    lanes: Sequence[LaneSpec],
    options: SweepOptions,
    results: Mapping[RunKey, PolicyResult],
    wa: Mapping[int, WaLane],
    lru_checks: Mapping[int, LruCheck] | None = None,
) -> PolicySweepResult:
    """policies.json from the runs' results (the CLI's and the service's merge alike)."""
    out = []
    for lane in lanes:
        rows = [results[RunKey(lane.index, p, c)] for p in options.policies for c in options.capacity_gb]
        out.append(
            LaneSweep(
                lane=lane.instance_id,
                block_size=lane.block_size,
                block_bytes=lane.block_bytes,
                results=rows,
                wa=wa.get(lane.index),
                lru_check=(lru_checks or {}).get(lane.index),
            )
        )
    given = options.wa_life_seconds
    first_wa = next((w for w in (wa.get(lane.index) for lane in lanes) if w is not None), None)
    settings = WaSettings(
        life_s=given if given is not None else (first_wa.life_s if first_wa else None),
        life_derived=given is None,
        fit_window_s=options.wa_fit_window_seconds,
        refit_s=options.wa_refit_seconds,
    )
    return PolicySweepResult(lanes=out, wa=settings)
