"""The routing what-if: the config's one instance as N replicas, every read routed to one replica
per router (litehit.routes.routers, the replay plan's lane router), one part per router x replica
(the exact lane core: the only producer of facts); the merge publishes each router's facts
(``routes_<router>_facts.csv``, lanes r0..r{N-1}) and routes.json from them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from litehit.db.states import Stage
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.jobs.replay import LanePart, ReplayPartResult
from litehit.routes.options import Router, RoutesOptions
from litehit.spec import ReplaySpec

if TYPE_CHECKING:
    from litehit.publish import AtomicPublisher
    from litehit.replay.plan import ChunkPlan, ReplayPlan

__all__ = ["KIND", "RESULT_FILE", "RoutedReplaySpec", "RoutesJobSpec", "RoutesKind", "routed_runtime"]

RESULT_FILE = "routes.json"
PLOT_FILE = "routes.png"


class RoutedReplaySpec(ReplaySpec):
    """A replay config whose one instance is replicated and routed (litehit.replay.plan reads
    ``lane_router``; it is never stored: the job's spec keeps the config and the options)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    lane_router: Any = Field(default=None, exclude=True)


def routed_runtime(runtime: ReplaySpec, options: RoutesOptions) -> RoutedReplaySpec:
    from litehit.routes.routers import RouterSet

    fields = {name: getattr(runtime, name) for name in type(runtime).model_fields}
    routed = RoutedReplaySpec.model_construct(
        _fields_set=runtime.model_fields_set, **fields, lane_router=RouterSet(options)
    )
    object.__setattr__(routed, "__pydantic_extra__", dict(runtime.__pydantic_extra__ or {}))
    return routed


class RoutesJobSpec(TraceJobSpec):
    routes: RoutesOptions = Field(description="the replicas, routers and capacities of the what-if")

    def replay_spec(self, trace: str, output: str) -> ReplaySpec:
        return routed_runtime(super().replay_spec(trace, output), self.routes)


class RoutesPart(PartPlan):
    router: Router = Field(description="the router whose replica this part is")
    replica: int = Field(description="the replica, from 0 (its lane is named r<replica>)")


def facts_paths(out: Path, options: RoutesOptions) -> dict[Router, Path]:
    from litehit.routes.document import facts_file_name

    return {router: out / facts_file_name(router) for router in options.routers}


class _RoutesMerger:
    """Each router's facts rows of every chunk, in input order, into its own facts file (all
    published at finish, tmp-then-rename), then routes.json from them."""

    def __init__(self, options: RoutesOptions, runtime: ReplaySpec, plan: ReplayPlan) -> None:
        from litehit.publish import AtomicPublisher
        from litehit.replay.render import header_for

        self.options, self.plan = options, plan
        self.paths = facts_paths(Path(runtime.output_result_path), options)
        self.publishers: list[AtomicPublisher] = []
        for path in self.paths.values():
            publisher = AtomicPublisher(path).__enter__()
            self.publishers.append(publisher)
            publisher.write(header_for(plan.extended))
        n = options.replicas
        self.plans = [replace(plan, lanes=plan.lanes[g * n : (g + 1) * n]) for g in range(len(options.routers))]
        self.start = time.perf_counter()

    def add_chunk(self, chunk: ChunkPlan, outputs: Sequence[tuple[Any, ...]]) -> None:
        import numpy as np

        from litehit.replay.lanes import LaneFacts
        from litehit.replay.render import render_chunk

        n, groups = self.options.replicas, len(self.options.routers)
        for g, (publisher, plan) in enumerate(zip(self.publishers, self.plans, strict=True)):
            mine = slice(g, None, groups)  # the facts rows of a read: one per router, in order
            part = replace(
                chunk,
                out_src=np.ascontiguousarray(chunk.out_src[mine]),
                out_lane=np.ascontiguousarray(chunk.out_lane[mine] - g * n),
                out_pos=np.ascontiguousarray(chunk.out_pos[mine]),
                lanes=chunk.lanes[g * n : (g + 1) * n],
            )
            facts = [LaneFacts(*arrays) for arrays in outputs[g * n : (g + 1) * n]]
            publisher.write(render_chunk(plan, part, facts))

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        from litehit.routes.document import routes_document

        for publisher in self.publishers:
            publisher.commit()
        document = routes_document(self.options, self.paths)
        document["trace"] = {"format": counts.trace_format, "reads": counts.reads, "blocks": counts.blocks}
        stats = {"facts": {r.value: str(p) for r, p in self.paths.items()}, "seconds": time.perf_counter() - self.start}
        return Merged(document, stats)

    def close(self) -> None:
        for publisher in self.publishers:
            publisher.__exit__(None, None, None)


def document_bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=1).encode() + b"\n"


class RoutesKind(TraceKind[RoutesJobSpec]):
    kind = Kind.ROUTES
    what = "routing what-if"
    route = "/routes"
    tasks = "routes"
    spec_model = RoutesJobSpec
    public_name = "RoutesPublic"
    part_stage = Stage.LANES
    part_view_name = "RouteReplicaPublic"
    part_view_doc = "One replica of one router: the lane core over the requests routed to it."
    parts_description = "one row per router x replica"
    view_totals = True
    options_field = "routes"
    options_model = RoutesOptions
    options_description = "replicas, routers (round_robin, random, session, prefix_hash), per-replica capacities"
    chunk_arrays = 3  # each replica's facts of each chunk: segments, their offsets, cut reasons
    cancelled = "routing what-if cancelled; nothing was published"
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="result",
            file=f"out/{RESULT_FILE}",
            media_type="application/json",
            summary="routes.json (the bytes of `litehit routes -o`)",
            link="result",
        ),
        Artifact(
            path="plot.png",
            file=f"out/{PLOT_FILE}",
            media_type="image/png",
            summary="Hit rate against per-replica capacity per router, and the load imbalance (PNG)",
            link="plot",
        ),
        Artifact(
            path="facts/{name}",
            file="out/routes_{name}_facts.csv",
            media_type="text/csv",
            summary="A state-free router's per-replica facts (lanes r0..r{N-1}): query, curve and tiers read them",
            link="facts_{name}",
            choices={"name": tuple(r.value for r in Router)},
            download_name="routes_facts_{id}.csv",
        ),
    )

    def plan_model(self) -> type[PartPlan]:
        return RoutesPart

    def result_model(self) -> type[BaseModel]:
        return ReplayPartResult

    def parts(self, spec: RoutesJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        n = spec.routes.replicas
        return [
            RoutesPart(
                lane=lane.index,
                instance_id=lane.instance_id,
                router=spec.routes.routers[lane.index // n],
                replica=lane.index % n,
            )
            for lane in plan.lanes
        ]

    def part_label(self, part: PartPlan) -> str:
        assert isinstance(part, RoutesPart)
        return f"{part.router.value}/{part.instance_id}"

    def describe(self, part: PartPlan) -> str:
        return f"router {self.part_label(part)}"

    def open_part(self, spec: RoutesJobSpec, plan: ReplayPlan, part: PartPlan) -> LanePart:
        return LanePart(plan, part)

    def merger(
        self, spec: RoutesJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _RoutesMerger:
        return _RoutesMerger(spec.routes, runtime, plan)

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.publish import publish_bytes
        from litehit.routes.plot import plot_routes

        path = publish_bytes(out / RESULT_FILE, document_bytes(value))
        plot_routes(value, out / PLOT_FILE)
        return path


KIND = RoutesKind()
