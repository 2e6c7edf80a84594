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

__all__ = ["KIND", "WINDOW_VIEW", "WindowJobSpec", "WindowKind", "WindowPart", "window_settings"]

DELAYS = "delays"  # a part's array: its evicted misses' delays (ns), sorted


class WindowJobSpec(TraceJobSpec):
    window: WindowOptions = Field(description="the capacity, policy and coverage of the sizing")


class WindowPart(PartPlan):
    capacity_blocks: int = Field(description="the sizing's capacity in the lane's blocks")


WINDOW_VIEW: dict[str, tuple[tuple[str, ...], Any]] = {
    "requests": (("requests",), 0),
    "evictions": (("evictions",), 0),
    "evicted": (("outcomes", "evicted"), 0),
    "no_match": (("outcomes", "no_match"), 0),
    "delay_count": (("delay_s", "count"), 0),
    "delay_p50": (("delay_s", "p50"), None),
    "delay_p90": (("delay_s", "p90"), None),
    "delay_p99": (("delay_s", "p99"), None),
    "delay_p999": (("delay_s", "p999"), None),
    "delay_max": (("delay_s", "max"), None),
    "window_s": (("window_s",), None),
    "peak_evictions_per_s": (("peak_evictions_per_s",), None),
    "memory_bytes": (("memory_bytes",), None),
}
"""The summary a sized lane shows (its whole entry is in window.json): each field, where it is in
the lane's LaneWindow, and what it shows before the lane succeeded."""


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
    part_view_name = "WindowLanePublic"
    part_view_doc = (
        "One lane simulated at the sizing's capacity; its summary once succeeded (the whole lane is in window.json)."
    )
    view_paths = WINDOW_VIEW
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

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.publish import publish_bytes
        from litehit.window.plot import plot_window

        path = publish_bytes(out / WINDOW_RESULT_FILE, value.json_bytes())
        plot_window(value, out / WINDOW_PLOT_FILE)
        return path


KIND = WindowKind()
