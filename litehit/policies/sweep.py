"""The in-process policy sweep (the CLI): one pass over the trace, every run advanced chunk by
chunk in parallel threads (the C simulator releases the GIL), optionally checked against the
exact lane core."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import core_c
from litehit.errors import ConfigError, ConfigIssue, ReplayError
from litehit.policies.options import SweepOptions
from litehit.policies.result import LaneSweep, LruCheck, PolicyResult, PolicySweepResult, WaLane, WaSettings
from litehit.policies.runs import PolicyRun, RunKey
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.lanes import LaneRunner
from litehit.replay.plan import LaneSpec, LaneWork, ReplayPlan, make_plan
from litehit.spec import ReplaySpec

__all__ = ["assemble_result", "check_sweepable", "run_keys", "run_policy_sweep"]


def check_sweepable(plan: ReplayPlan) -> None:
    """Policies ignore TTL in this version: a TTL lane is a config error naming the lane."""
    issues = [
        ConfigIssue(
            f"instances[{lane.index}]",
            lane.instance_id,
            f"lane {lane.instance_id} has a TTL of {lane.ttl_ns / 1e9:g} s: eviction-policy sweeps model no TTL; "
            "use a group with ttl_seconds 0",
        )
        for lane in plan.lanes
        if lane.ttl_ns
    ]
    if issues:
        raise ConfigError(issues)


def run_keys(plan: ReplayPlan, options: SweepOptions) -> list[RunKey]:
    """Every simulation of a sweep: lane-major, then policy, then capacity as asked."""
    return [
        RunKey(lane.index, policy, gb)
        for lane in plan.lanes
        for policy in options.policies
        for gb in options.capacity_gb
    ]


class _LruComparison:
    """Counts, per lane, how the LRU runs compare with the lane core's facts at their capacities."""

    def __init__(self, lane: LaneSpec, lru_runs: list[PolicyRun]) -> None:
        self.runner = LaneRunner(lane)
        self.runs = lru_runs
        self.comparisons = self.equal = self.lower = 0

    def check(self, work: LaneWork) -> None:
        facts = self.runner.run(work)
        projected = core_c.project_batch(facts.segments, facts.seg_offsets, [r.capacity_blocks for r in self.runs])
        for column, run in enumerate(self.runs):
            want = projected[:, column].astype(np.int64)
            higher = np.flatnonzero(want > run.last_hits)
            if len(higher):
                i = int(higher[0])
                raise ReplayError(
                    f"--verify-lru failed on lane {self.runner.spec.instance_id} at {run.key.capacity_gb:g} GiB: "
                    f"a request got {int(run.last_hits[i])} hit blocks in the LRU simulation but {int(want[i])} "
                    "from the exact facts"
                )
            self.comparisons += len(want)
            self.equal += int(np.count_nonzero(want == run.last_hits))
            self.lower += int(np.count_nonzero(want < run.last_hits))

    def tally(self) -> LruCheck:
        return LruCheck(comparisons=self.comparisons, equal=self.equal, facts_lower=self.lower)

    def close(self) -> None:
        self.runner.close()


def run_policy_sweep(
    spec: ReplaySpec,
    options: SweepOptions,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PolicySweepResult:
    """Simulates every lane of the spec under every policy at every capacity, in one pass."""
    path = spec.trace_file_path
    plan = make_plan(spec, resolve_format(spec, path), path)
    check_sweepable(plan)
    runs = [PolicyRun(key, plan.lanes[key.lane], options) for key in run_keys(plan, options)]
    checks = (
        [
            _LruComparison(lane, [r for r in runs if r.key.lane == lane.index and r.key.policy == "lru"])
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
        rows = [results[RunKey(lane.index, p, gb)] for p in options.policies for gb in options.capacity_gb]
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
