"""The routing what-if: the config's one instance as N replicas, every read routed to one replica
per state-free router (litehit.routes.routers, the replay plan's lane router), one part per router
x replica (the exact lane core: the only producer of facts); least_loaded and cache_aware, which
read the replicas' state, one part per router x capacity on the routing simulator (the policy
seam: core_c.route) over every read (the plan's pool lane). The merge publishes each state-free
router's facts (``routes_<router>_facts.csv``, lanes r0..r{N-1}) and routes.json from them and
from the simulations' numbers.
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
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, SummaryTable, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.jobs.replay import LanePart, ReplayPartResult
from litehit.routes.options import STATE_DEPENDENT, STATE_FREE, Router, RoutesOptions
from litehit.spec import ReplaySpec

if TYPE_CHECKING:
    from litehit.db.models import Base
    from litehit.publish import AtomicPublisher
    from litehit.replay.plan import ChunkPlan, LaneWork, ReplayPlan

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
    router: Router = Field(description="the router of this part")
    replica: int | None = Field(
        default=None, description="state-free routers: the replica, from 0 (its lane is named r<replica>)"
    )
    capacity: str | None = Field(
        default=None, description="least_loaded, cache_aware: the per-replica capacity simulated, as asked"
    )
    capacity_blocks: int | None = Field(default=None, description="that capacity in blocks (null: unbounded)")


class RoutesPartResult(ReplayPartResult):
    """A replica's lane (state-free routers), or a simulation's numbers at its capacity."""

    simulated: dict[str, Any] | None = Field(
        default=None,
        description="least_loaded, cache_aware: the capacity's entry of routes.json (once succeeded)",
    )


class _Simulation:
    """least_loaded or cache_aware at one per-replica capacity over every read (the pool lane):
    the replicas' LRU caches and the load window in the routing simulator (core_c.route)."""

    def __init__(self, options: RoutesOptions, plan: ReplayPlan, part: RoutesPart) -> None:
        from core_c.route import RouteSim

        lane = plan.lanes[part.lane]
        self.options, self.part, self.block_size = options, part, lane.block_size
        self.sim = RouteSim(
            part.router.value,
            replicas=options.replicas,
            capacity_blocks=(1 << 64) - 1 if part.capacity_blocks is None else part.capacity_blocks,
            block_size=lane.block_size,
            window_ns=options.window_ns,
            threshold=options.threshold,
            ttl_ns=lane.ttl_ns,
        )
        self.seen: list[tuple[Any, ...]] = []  # per chunk: input_lens, hit tokens, replica, timestamps

    def feed(self, work: LaneWork) -> None:
        replica, hits = self.sim.process_batch(work.keys, work.offsets, work.timestamps, work.input_lens)
        self.seen.append((work.input_lens, hits * self.block_size, replica.astype("int64"), work.timestamps))

    def output(self, categories: list[str]) -> PartOutput:
        import numpy as np

        from litehit.routes.document import capacity_entry

        def joined(k: int) -> Any:
            return np.concatenate([c[k] for c in self.seen]) if self.seen else np.zeros(0, np.int64)

        assert self.part.capacity is not None
        input_lens, hit_tokens, replica, timestamps = (joined(k) for k in range(4))
        entry = capacity_entry(
            self.part.capacity, self.part.capacity_blocks, input_lens, hit_tokens, replica, timestamps, self.options
        )
        return PartOutput(
            RoutesPartResult(requests=len(input_lens), blocks=0, memory_bytes=self.sim.memory_bytes(), simulated=entry)
        )

    def close(self) -> None:
        self.sim.close()


def facts_paths(out: Path, options: RoutesOptions) -> dict[Router, Path]:
    from litehit.routes.document import facts_file_name

    return {router: out / facts_file_name(router) for router in options.state_free}


class _RoutesMerger:
    """Each router's facts rows of every chunk, in input order, into its own facts file (all
    published at finish, tmp-then-rename), then routes.json from the same rows (kept in memory)."""

    def __init__(
        self, options: RoutesOptions, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> None:
        from litehit.publish import AtomicPublisher
        from litehit.replay.render import header_for

        self.options, self.plan, self.parts = options, plan, list(parts)
        self.paths = facts_paths(Path(runtime.output_result_path), options)
        self.publishers: list[AtomicPublisher] = []
        for path in self.paths.values():
            publisher = AtomicPublisher(path).__enter__()
            self.publishers.append(publisher)
            publisher.write(header_for(plan.extended))
        from litehit.routes.document import ReplicaRows

        n = options.replicas
        self.plans = [replace(plan, lanes=plan.lanes[g * n : (g + 1) * n]) for g in range(len(options.state_free))]
        self.rows = [
            [ReplicaRows(lane.instance_id, lane.block_size, lane.block_bytes) for lane in group.lanes]
            for group in self.plans
        ]
        self.start = time.perf_counter()

    def add_chunk(self, chunk: ChunkPlan, outputs: Sequence[tuple[Any, ...]]) -> None:
        import numpy as np

        from litehit.replay.lanes import LaneFacts
        from litehit.replay.render import render_chunk

        n = self.options.replicas
        groups = len(self.options.state_free) + bool(self.options.simulated)  # facts rows per read
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
            for rows, work, lane in zip(self.rows[g], part.lanes, facts, strict=True):
                rows.add(work.input_lens, work.timestamps, lane.segments, lane.seg_offsets)

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        from litehit.routes.document import routes_document

        for publisher in self.publishers:
            publisher.commit()
        simulated: dict[Router, list[dict[str, Any]]] = {r: [] for r in self.options.simulated}
        for part, output in zip(self.parts, outputs, strict=True):
            assert isinstance(part, RoutesPart)
            entry = getattr(output.result, "simulated", None)  # a lane part's result is ReplayPartResult
            if entry is not None:
                simulated[part.router].append(entry)
        from litehit.routes.routers import CHAINED_SESSIONS

        chained = self.plan.fmt in CHAINED_SESSIONS
        lanes = {router: [rows.lane() for rows in self.rows[g]] for g, router in enumerate(self.options.state_free)}
        document = routes_document(self.options, lanes, self.paths, simulated, chained=chained)
        document["trace"] = {"format": counts.trace_format, "reads": counts.reads, "blocks": counts.blocks}
        stats = {"facts": {r.value: str(p) for r, p in self.paths.items()}, "seconds": time.perf_counter() - self.start}
        return Merged(document, stats)

    def close(self) -> None:
        for publisher in self.publishers:
            publisher.__exit__(None, None, None)


class RouteRowPublic(BaseModel):
    """One router at one asked per-replica capacity (the SQL summary row; routes.json has the
    replicas' numbers and the curves)."""

    router: str = Field(description="the router")
    capacity: str = Field(description="the per-replica capacity as asked")
    capacity_blocks: int | None = Field(description="that capacity in blocks (null: unbounded)")
    hit_rate: float = Field(description="sum of hit tokens / sum of input tokens over all replicas")
    hit_tokens: int = Field(description="hit tokens over all replicas")
    input_tokens: int = Field(description="input tokens over all replicas")
    max_over_mean: float = Field(description="the busiest replica's prefill tokens / the mean over the replicas")
    p99_over_mean: float = Field(description="nearest-rank p99 over the load windows of the same ratio")
    vs_round_robin: float | None = Field(description="hit_rate - round_robin's (null without round_robin)")


def document_bytes(document: dict[str, Any]) -> bytes:
    """routes.json: indented, except each curve (often 10^5 points), which is one line written by
    the C encoder (json's indented encoder is pure Python: seconds for a long curve)."""
    curves: list[str] = []
    routers = []
    for entry in document.get("routers", []):
        if entry.get("curve") is not None:
            routers.append({**entry, "curve": f"\x00curve{len(curves)}\x00"})
            curves.append(json.dumps(entry["curve"]))
        else:
            routers.append(entry)
    text = json.dumps({**document, "routers": routers}, indent=1)
    for i, curve in enumerate(curves):
        text = text.replace(f'"\\u0000curve{i}\\u0000"', curve, 1)
    return text.encode() + b"\n"


class RoutesKind(TraceKind[RoutesJobSpec]):
    kind = Kind.ROUTES
    what = "routing what-if"
    route = "/routes"
    tasks = "routes"
    spec_model = RoutesJobSpec
    public_name = "RoutesPublic"
    summary_table = SummaryTable("RouteRow")
    part_stage = Stage.LANES
    part_view_name = "RouteReplicaPublic"
    part_view_doc = (
        "One replica of a state-free router (the lane core over the requests routed to it), or one capacity of "
        "least_loaded or cache_aware (the routing simulator over every request)."
    )
    parts_description = "one row per state-free router x replica, and per simulated router x capacity"
    view_totals = True
    options_field = "routes"
    options_model = RoutesOptions
    options_description = (
        "replicas, routers (round_robin, random, session, prefix_hash, least_loaded, cache_aware), per-replica "
        "capacities"
    )
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
            choices={"name": tuple(r.value for r in STATE_FREE)},
            download_name="routes_facts_{id}.csv",
        ),
    )

    def plan_model(self) -> type[PartPlan]:
        return RoutesPart

    def summary_rows(self, job_id: str, value: Any, spec: Any) -> list[Base]:
        from litehit.db.models import RouteRow

        return [
            RouteRow(
                job_id=job_id,
                router=entry["router"],
                slot=slot,
                position=position,
                capacity=at["capacity"],
                capacity_blocks=at["capacity_blocks"],
                hit_rate=at["hit_rate"],
                hit_tokens=at["hit_tokens"],
                input_tokens=at["input_tokens"],
                max_over_mean=at["imbalance"]["max_over_mean"],
                p99_over_mean=at["imbalance"]["p99_over_mean"],
                vs_round_robin=at["vs_round_robin"],
            )
            for position, entry in enumerate(value["routers"])
            for slot, at in enumerate(entry["capacities"])
        ]

    def summary_order(self) -> tuple[str, ...]:
        return ("slot", "position")

    def extra_public_fields(self) -> dict[str, Any]:
        return {
            "summary": (
                list[RouteRowPublic],
                Field(description="per asked capacity, per router (in the order asked): the SQL summary rows"),
            ),
            **super().extra_public_fields(),
        }

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        fields = RouteRowPublic.model_fields
        return {**super().view(job, parts, summaries), "summary": [{n: row[n] for n in fields} for row in summaries]}

    def result_model(self) -> type[BaseModel]:
        return RoutesPartResult

    def parts(self, spec: RoutesJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        from litehit.tiers.config import parse_capacity

        options = spec.routes
        n = options.replicas
        parts: list[PartPlan] = [
            RoutesPart(
                lane=lane.index,
                instance_id=lane.instance_id,
                router=options.state_free[lane.index // n],
                replica=lane.index % n,
            )
            for lane in plan.lanes[: len(options.state_free) * n]
        ]
        if options.simulated:
            pool = plan.lanes[-1]
            for router in options.simulated:
                for i, text in enumerate(options.capacities):
                    slot = parse_capacity(text, f"capacities[{i}]")
                    parts.append(
                        RoutesPart(
                            lane=pool.index,
                            instance_id=pool.instance_id,
                            router=router,
                            capacity=text,
                            capacity_blocks=slot.blocks(pool.block_bytes, pool.block_size),
                        )
                    )
        return parts

    def chunk_arrays_of(self, part: PartPlan) -> int:
        assert isinstance(part, RoutesPart)
        return 0 if part.router in STATE_DEPENDENT else self.chunk_arrays

    def part_label(self, part: PartPlan) -> str:
        assert isinstance(part, RoutesPart)
        where = part.instance_id if part.replica is not None else f"at {part.capacity}"
        return f"{part.router.value}/{where}"

    def describe(self, part: PartPlan) -> str:
        return f"router {self.part_label(part)}"

    def open_part(self, spec: RoutesJobSpec, plan: ReplayPlan, part: PartPlan) -> LanePart | _Simulation:
        assert isinstance(part, RoutesPart)
        if part.router in STATE_DEPENDENT:
            return _Simulation(spec.routes, plan, part)
        return LanePart(plan, part)

    def merger(
        self, spec: RoutesJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _RoutesMerger:
        return _RoutesMerger(spec.routes, runtime, plan, parts)

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.publish import publish_bytes
        from litehit.routes.plot import plot_routes

        path = publish_bytes(out / RESULT_FILE, document_bytes(value))
        plot_routes(value, out / PLOT_FILE)
        return path


KIND = RoutesKind()
