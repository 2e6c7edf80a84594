"""The window sizing: every lane simulated at one capacity under one policy on the fixed-capacity
simulator with miss evidence, one part per lane; each part keeps its evicted misses' delays (an
array), and the merge sizes the window over all lanes from them into ``window.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from litehit.db.states import Stage
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.storage import WINDOW_PLOT_FILE, WINDOW_RESULT_FILE
from litehit.window.options import WindowOptions
from litehit.window.result import LaneWindow, WindowResult, WindowSettings

if TYPE_CHECKING:
    from litehit.replay.plan import LaneWork, ReplayPlan
    from litehit.spec import ReplaySpec
    from litehit.window.runs import WindowRun

__all__ = ["KIND", "WindowJobSpec", "WindowKind", "WindowPart", "window_settings"]

DELAYS = "delays"  # a part's array: its evicted misses' delays (ns), sorted


class WindowJobSpec(TraceJobSpec):
    window: WindowOptions = Field(description="the capacity, policy and coverage of the sizing")


class WindowPart(PartPlan):
    capacity_blocks: int = Field(description="the sizing's capacity in the lane's blocks")


class WindowLaneView(BaseModel):
    """One lane simulated at the sizing's capacity; its summary once succeeded (the whole lane
    is in window.json)."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    capacity_blocks: int = Field(description="the sizing's capacity in the lane's blocks")
    requests: int = Field(default=0, description="requests simulated")
    evictions: int = Field(default=0, description="blocks evicted")
    evicted: int = Field(default=0, description="misses whose first uncached block was evicted earlier")
    no_match: int = Field(default=0, description="misses whose first uncached block was never evicted at this lane")
    delay_count: int = Field(default=0, description="evicted misses with a measured delay (eviction to the miss)")
    delay_p50: float | None = Field(default=None, description="median delay from eviction to the miss, seconds")
    delay_p90: float | None = Field(default=None, description="90th percentile of that delay, seconds")
    delay_p99: float | None = Field(default=None, description="99th percentile of that delay, seconds")
    delay_p999: float | None = Field(default=None, description="99.9th percentile of that delay, seconds")
    delay_max: float | None = Field(default=None, description="longest such delay, seconds")
    window_s: float | None = Field(default=None, description="W: the smallest window reaching the coverage target")
    peak_evictions_per_s: int | None = Field(default=None, description="E: the most evictions in one aligned second")
    memory_bytes: float | None = Field(default=None, description="E x W x entry_bytes / load_factor")


def lane_summary(lane: LaneWindow) -> dict[str, Any]:
    """The view's fields of a sized lane (its summary; the whole lane is in window.json)."""
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
    }


def window_settings(options: WindowOptions) -> WindowSettings:
    return WindowSettings(
        policy=options.policy,
        capacity_gb=options.capacity_gb,
        coverage_target=options.coverage,
        entry_bytes=options.entry_bytes,
        load_factor=options.load_factor,
        bucket_s=options.bucket_seconds,
    )


class _Sizing:
    def __init__(self, spec: WindowJobSpec, plan: ReplayPlan, part: PartPlan) -> None:
        from litehit.window.runs import WindowRun

        self.run: WindowRun = WindowRun(plan.lanes[part.lane], spec.window)

    def feed(self, work: LaneWork) -> None:
        self.run.feed(work)

    def output(self, categories: list[str]) -> PartOutput:
        lane = self.run.result(categories)
        delays, _, _ = self.run.sample.sorted_delays()
        return PartOutput(lane, {DELAYS: delays})

    def close(self) -> None:
        self.run.close()


class _WindowMerger:
    def __init__(self, spec: WindowJobSpec) -> None:
        self.options = spec.window

    def add_chunk(self, chunk: Any, outputs: Sequence[tuple[Any, ...]]) -> None:
        raise AssertionError("a window sizing's parts emit nothing per chunk")

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        from litehit.window.runs import overall_report

        lanes = [o.result for o in outputs]
        assert all(isinstance(lane, LaneWindow) for lane in lanes)
        overall = overall_report(lanes, [o.arrays[DELAYS] for o in outputs], self.options.coverage)  # type: ignore[arg-type]
        result = WindowResult(settings=window_settings(self.options), lanes=lanes, overall=overall)  # type: ignore[arg-type]
        return Merged(result, {"lanes": len(lanes), "window_s": result.overall.window_s})

    def close(self) -> None:
        pass


class WindowKind(TraceKind[WindowJobSpec]):
    kind = Kind.WINDOW
    what = "window sizing"
    route = "/windows"
    tasks = "window"
    spec_model = WindowJobSpec
    public_name = "WindowPublic"
    part_stage = Stage.SIZE
    part_view_model = WindowLaneView
    part_view_name = "WindowLanePublic"
    options_field = "window"
    options_model = WindowOptions
    options_description = "the capacity, policy and coverage of the sizing"
    ttl_lanes = False
    part_arrays = (DELAYS,)
    cancelled = "window sizing cancelled; nothing published"
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="window.json",
            file=f"out/{WINDOW_RESULT_FILE}",
            media_type="application/json",
            summary="window.json: every lane and all lanes together (the same bytes as `litehit window -o`)",
            link="result",
        ),
        Artifact(
            path="plot.png",
            file=f"out/{WINDOW_PLOT_FILE}",
            media_type="image/png",
            summary="Coverage of evicted misses over window length (log x), one panel per lane",
            link="plot",
        ),
    )

    def plan_model(self) -> type[PartPlan]:
        return WindowPart

    def result_model(self) -> type[BaseModel]:
        return LaneWindow

    def parts(self, spec: WindowJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        from litehit.policies.options import lane_capacity_blocks

        return [
            WindowPart(
                lane=lane.index,
                instance_id=lane.instance_id,
                capacity_blocks=lane_capacity_blocks(spec.window.capacity_gb, lane.block_bytes, lane.block_size),
            )
            for lane in plan.lanes
        ]

    def open_part(self, spec: WindowJobSpec, plan: ReplayPlan, part: PartPlan) -> _Sizing:
        return _Sizing(spec, plan, part)

    def merger(
        self, spec: WindowJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _WindowMerger:
        return _WindowMerger(spec)

    def part_view(
        self, plan: dict[str, Any], progress: dict[str, Any], result: dict[str, Any] | None
    ) -> dict[str, Any]:
        summary = lane_summary(LaneWindow.model_validate(result)) if result else {}
        return {**plan, **progress, **summary}

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.publish import publish_bytes
        from litehit.window.plot import plot_window

        path = publish_bytes(out / WINDOW_RESULT_FILE, value.json_bytes())
        plot_window(value, out / WINDOW_PLOT_FILE)
        return path


KIND = WindowKind()
