"""The simulations of a policy sweep (lane x policy x capacity, in that order) and policies.json
assembled from their results (litehit.jobs.policy_sweep runs them, in process or as tasks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from litehit.policies.options import SweepOptions
from litehit.policies.result import LaneSweep, LruCheck, PolicyResult, PolicySweepResult, WaLane, WaSettings
from litehit.policies.runs import RunKey
from litehit.replay.plan import LaneSpec, ReplayPlan

__all__ = ["assemble_result", "run_keys"]


def run_keys(plan: ReplayPlan, options: SweepOptions) -> list[RunKey]:
    """Every simulation of a sweep: lane-major, then policy, then capacity as asked."""
    return [
        RunKey(lane.index, policy, capacity)
        for lane in plan.lanes
        for policy in options.policies
        for capacity in options.capacity_gb
    ]


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
