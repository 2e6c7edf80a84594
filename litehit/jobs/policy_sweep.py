"""The policy sweep: every lane under every policy at every capacity on the fixed-capacity
simulator (the policy seam, never a facts producer), one part per simulation (lane x policy x
capacity); the merge assembles ``policies.json``.

With ``verify_lru`` each LRU simulation also replays the exact lane core and compares its facts
with the simulation, request by request (facts above the simulation fail the part).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from litehit.db.states import Stage
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.policies.options import POLICY_CHOICES, SweepOptions
from litehit.storage import SWEEP_PLOT_FILE, SWEEP_RESULT_FILE

if TYPE_CHECKING:
    from litehit.policies.result import PolicySweepResult
    from litehit.policies.runs import LruComparison, PolicyRun
    from litehit.replay.plan import LaneWork, ReplayPlan
    from litehit.spec import ReplaySpec

__all__ = ["KIND", "SweepJobSpec", "SweepKind", "SweepPart", "SweepPartResult"]


class SweepJobSpec(TraceJobSpec):
    sweep: SweepOptions = Field(description="the policies and capacities to simulate")


class SweepPart(PartPlan):
    """One simulation: a lane under one policy at one capacity."""

    run: int = Field(description="index of the simulation in the job")
    policy: str = Field(description=POLICY_CHOICES)
    slot: int = Field(description="index in sweep.capacity_gb")
    capacity_gb: float = Field(description="the capacity in binary GiB")
    capacity_blocks: int = Field(description="the capacity in the lane's blocks")


class SweepPartResult(BaseModel):
    """What one simulation counted (the sums its row of policies.json is made of; a view shows the
    defaults before it succeeded)."""

    requests: int = Field(default=0, description="requests simulated")
    hit_blocks: int = Field(default=0, description="blocks found in the cache")
    hit_tokens: int = Field(default=0, description="tokens of the hit blocks")
    input_tokens: int = Field(default=0, description="input tokens of the requests")
    hit_ratio: float | None = Field(default=None, description="hit_tokens / input_tokens (null before it succeeded)")
    evictions: int = Field(default=0, description="blocks evicted")
    details: dict[str, Any] = Field(
        default_factory=dict, description="wa: what WA learnt; lru_check: the --verify-lru tally"
    )


class _Simulation:
    """One simulation at work (and its check against the exact lane core)."""

    def __init__(self, spec: SweepJobSpec, plan: ReplayPlan, part: SweepPart) -> None:
        from litehit.policies.runs import LruComparison, PolicyRun, RunKey

        options = spec.sweep
        lane = plan.lanes[part.lane]
        self.sim: PolicyRun = PolicyRun(RunKey(part.lane, part.policy, options.capacity_gb[part.slot]), lane, options)
        self.check: LruComparison | None = None
        if options.verify_lru and part.policy == "lru":
            self.check = LruComparison(lane, [self.sim])

    def feed(self, work: LaneWork) -> None:
        self.sim.feed(work)
        if self.check is not None:
            self.check.check(work)

    def output(self, categories: list[str]) -> PartOutput:
        r = self.sim.result()
        details: dict[str, Any] = {}
        if self.sim.key.policy == "wa":
            details["wa"] = self.sim.wa_state(categories).model_dump(mode="json")
        if self.check is not None:
            details["lru_check"] = self.check.tally().model_dump(mode="json")
        return PartOutput(
            SweepPartResult(
                requests=r.requests,
                hit_blocks=r.hit_blocks,
                hit_tokens=r.hit_tokens,
                input_tokens=r.input_tokens,
                hit_ratio=r.hit_ratio,
                evictions=r.evictions,
                details=details,
            )
        )

    def close(self) -> None:
        self.sim.close()
        if self.check is not None:
            self.check.close()


class _SweepMerger:
    """policies.json from the simulations' results, lane by lane in the order the sweep asks."""

    def __init__(self, spec: SweepJobSpec, plan: ReplayPlan, parts: Sequence[PartPlan]) -> None:
        self.options, self.plan, self.parts = spec.sweep, plan, list(parts)

    def add_chunk(self, chunk: Any, outputs: Sequence[tuple[Any, ...]]) -> None:
        raise AssertionError("a sweep's parts emit nothing per chunk")

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        from litehit.policies.result import LruCheck, PolicyResult, WaLane
        from litehit.policies.runs import RunKey
        from litehit.policies.sweep import assemble_result

        results: dict[RunKey, PolicyResult] = {}
        wa: dict[int, WaLane] = {}
        checks: dict[int, LruCheck] = {}
        for part, output in zip(self.parts, outputs, strict=True):
            assert isinstance(part, SweepPart)
            r = output.result
            assert isinstance(r, SweepPartResult)
            key = RunKey(part.lane, part.policy, self.options.capacity_gb[part.slot])
            results[key] = PolicyResult(
                policy=part.policy,
                capacity_gb=part.capacity_gb,
                capacity=key.capacity if isinstance(key.capacity, str) else None,
                capacity_blocks=part.capacity_blocks,
                requests=r.requests,
                hit_blocks=r.hit_blocks,
                hit_tokens=r.hit_tokens,
                input_tokens=r.input_tokens,
                hit_ratio=r.hit_ratio or 0.0,
                evictions=r.evictions,
            )
            if "wa" in r.details and part.lane not in wa:  # WA learns the same at every capacity
                wa[part.lane] = WaLane.model_validate(r.details["wa"])
            if "lru_check" in r.details:
                tally = LruCheck.model_validate(r.details["lru_check"])
                total = checks.get(part.lane, LruCheck(comparisons=0, equal=0, facts_lower=0))
                checks[part.lane] = LruCheck(
                    comparisons=total.comparisons + tally.comparisons,
                    equal=total.equal + tally.equal,
                    facts_lower=total.facts_lower + tally.facts_lower,
                )
        result = assemble_result(self.plan.lanes, self.options, results, wa, checks)
        return Merged(result, {"runs": len(self.parts), "lanes": len(result.lanes), "wa_life_s": result.wa.life_s})

    def close(self) -> None:
        pass


class SweepKind(TraceKind[SweepJobSpec]):
    kind = Kind.POLICY_SWEEP
    what = "policy sweep"
    route = "/policy-sweeps"
    tasks = "sweep"
    spec_model = SweepJobSpec
    public_name = "PolicySweepPublic"
    part_stage = Stage.SIMULATE
    part_task = "run"
    part_noun = "simulation"
    parts_field = "runs"
    parts_description = "one row per simulation (lane x policy x capacity)"
    part_view_name = "SweepRunPublic"
    part_view_doc = "One simulation: a lane under one policy at one capacity; results once succeeded."
    options_field = "sweep"
    options_model = SweepOptions
    options_description = "the policies and capacities to simulate"
    ttl_lanes = False
    cancelled = "policy sweep cancelled; nothing published"
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="result.json",
            file=f"out/{SWEEP_RESULT_FILE}",
            media_type="application/json",
            summary="policies.json: every lane x policy x capacity (the same bytes as `litehit policies -o`)",
            link="result",
        ),
        Artifact(
            path="plot.png",
            file=f"out/{SWEEP_PLOT_FILE}",
            media_type="image/png",
            summary="Hit ratio over capacity, one line per policy, one panel per lane",
            link="plot",
        ),
    )

    def plan_model(self) -> type[PartPlan]:
        return SweepPart

    def result_model(self) -> type[BaseModel]:
        return SweepPartResult

    def parts(self, spec: SweepJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        from litehit.policies.options import capacity_gib, lane_capacity_blocks
        from litehit.policies.sweep import run_keys

        options = spec.sweep
        parts: list[PartPlan] = []
        for i, key in enumerate(run_keys(plan, options)):
            lane = plan.lanes[key.lane]
            blocks = lane_capacity_blocks(key.capacity, lane.block_bytes, lane.block_size)
            parts.append(
                SweepPart(
                    lane=key.lane,
                    instance_id=lane.instance_id,
                    run=i,
                    policy=key.policy,
                    slot=options.capacity_gb.index(key.capacity),
                    capacity_gb=capacity_gib(key.capacity, blocks, lane.block_bytes),
                    capacity_blocks=blocks,
                )
            )
        return parts

    def part_label(self, part: PartPlan) -> str:
        assert isinstance(part, SweepPart)
        return str(part.run)

    def describe(self, part: PartPlan) -> str:
        assert isinstance(part, SweepPart)
        return f"{part.policy} at {part.capacity_gb:g} GiB on lane {part.instance_id}"

    def open_part(self, spec: SweepJobSpec, plan: ReplayPlan, part: PartPlan) -> _Simulation:
        assert isinstance(part, SweepPart)
        return _Simulation(spec, plan, part)

    def merger(
        self, spec: SweepJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _SweepMerger:
        return _SweepMerger(spec, plan, parts)

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.policies.plot import plot_sweep
        from litehit.publish import publish_bytes

        sweep: PolicySweepResult = value
        path = publish_bytes(out / SWEEP_RESULT_FILE, sweep.json_bytes())
        plot_sweep(sweep, out / SWEEP_PLOT_FILE)
        return path


KIND = SweepKind()
