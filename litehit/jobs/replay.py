"""The replay: one part per lane, each the exact lane core over the lane's requests (the only
producer of facts); the merge renders every chunk's facts rows in input order and publishes
``litehit_facts.csv`` atomically.

The spec is the replay config itself (stored as it is: an original offline config, with the
trace relative to the storage root in the service).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field, model_serializer, model_validator

from litehit.db.states import JobState, Stage
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, PartRun, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.replay.result import FACTS_FILE, LaneStats, ReplayResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from litehit.curve import LaneCurves
    from litehit.publish import AtomicPublisher
    from litehit.replay.chunks import Progress
    from litehit.replay.lanes import LaneRunner, SharedLanes
    from litehit.replay.plan import ChunkPlan, LaneWork, ReplayPlan
    from litehit.spec import ReplaySpec

__all__ = ["FACTS_FILE", "KIND", "LanePart", "ReplayJobSpec", "ReplayKind", "ReplayPartResult", "run_replay"]


class ReplayJobSpec(TraceJobSpec):
    """A replay's spec: its config, stored at the top level of Job.spec (as the API shows it)."""

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and set(data) != {"config"}:
            return {"config": data}
        return data

    @model_serializer
    def _flat(self) -> dict[str, Any]:
        return self.config


class ReplayPartResult(BaseModel):
    """What one lane saw over the whole trace, and the size of its core at the end (a view shows
    the defaults before the lane succeeded)."""

    requests: int = Field(default=0, description="requests of the lane replayed (so far)")
    blocks: int = Field(default=0, description="blocks of the lane replayed (so far)")
    unique_blocks: int | None = Field(default=None, description="distinct block keys the lane saw (once succeeded)")
    memory_bytes: int | None = Field(default=None, description="memory the lane's engine used (once succeeded)")
    expired_blocks: int | None = Field(default=None, description="blocks dropped by the group's TTL (once succeeded)")
    shares_core_with: str | None = Field(
        default=None,
        description="the lane whose lane core this lane shared (lanes of the same requests that differ only in "
        "TTL share one: its memory_bytes counts theirs); None: a core of its own",
    )


class LanePart:
    """A lane at work: the lane core over its requests; each chunk's facts go to the merge."""

    def __init__(self, plan: ReplayPlan, part: PartPlan) -> None:
        from litehit.replay.lanes import LaneRunner

        self.runner: LaneRunner = LaneRunner(plan.lanes[part.lane], keep_expired=plan.extended)

    def feed(self, work: LaneWork) -> tuple[Any, ...]:
        facts = self.runner.run(work)
        return facts.segments, facts.seg_offsets, facts.cuts

    def output(self, categories: list[str]) -> PartOutput:
        return _lane_output(self.runner.stats())

    def close(self) -> None:
        self.runner.close()


class SharedLanePart:
    """A lane of a unit sharing one lane core (SharedLanes): the unit's first lane runs the core
    for every lane of the unit; each lane, fed the chunk right after it (the unit's order),
    returns its own facts of it (SharedLanes.last)."""

    def __init__(self, shared: SharedLanes, view: int) -> None:
        self.shared, self.view = shared, view

    def feed(self, work: LaneWork) -> tuple[Any, ...]:
        if self.view == 0:
            self.shared.run(work)
        facts = self.shared.last[self.view]
        return facts.segments, facts.seg_offsets, facts.cuts

    def output(self, categories: list[str]) -> PartOutput:
        return _lane_output(self.shared.stats(self.view))

    def close(self) -> None:
        self.shared.close()  # (idempotent)


def _lane_output(s: LaneStats) -> PartOutput:
    return PartOutput(
        ReplayPartResult(
            requests=s.requests,
            blocks=s.blocks,
            unique_blocks=s.unique_blocks,
            memory_bytes=s.memory_bytes,
            expired_blocks=s.expired_blocks,
            shares_core_with=s.shares_core_with,
        )
    )


class _FactsMerger:
    """Renders the facts rows of every chunk in input order into the facts file, published at
    finish (tmp-then-rename: nothing is published unless every chunk was rendered)."""

    def __init__(self, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]) -> None:
        from litehit.publish import AtomicPublisher
        from litehit.replay.ordered_map import OneBehind
        from litehit.replay.render import header_for

        self.plan, self.parts = plan, list(parts)
        self.path = Path(runtime.output_result_path) / FACTS_FILE
        self.publisher: AtomicPublisher = AtomicPublisher(self.path).__enter__()
        self.publisher.write(header_for(plan.extended))
        self.rows = 0
        self.start = time.perf_counter()
        self._writing = OneBehind("litehit-facts", helper=True)  # renders and writes a chunk behind the lanes
        self.curves: LaneCurves | None = None  # the summary's curves, made as the rows are written
        if not any(lane.hybrid for lane in plan.lanes):
            from litehit.curve import LaneCurves

            self.curves = LaneCurves([(lane.instance_id, lane.block_size, lane.block_bytes) for lane in plan.lanes])

    def add_chunk(self, chunk: ChunkPlan, outputs: Sequence[tuple[Any, ...]]) -> None:
        """Renders and writes a chunk's rows in the merger's thread while the caller goes on with
        the next chunk (one chunk in flight, so the rows stay in order; a failed write raises
        here at the next chunk or at finish)."""
        self._writing.submit(self._write_chunk, chunk, outputs)
        self.rows += len(chunk.out_src)

    def _write_chunk(self, chunk: ChunkPlan, outputs: Sequence[tuple[Any, ...]]) -> None:
        from litehit.replay.lanes import LaneFacts
        from litehit.replay.render import render_chunk

        facts = [LaneFacts(*arrays) for arrays in outputs]
        self.publisher.write(render_chunk(self.plan, chunk, facts))
        if self.curves is not None:
            for lane, (work, lane_facts) in enumerate(zip(chunk.lanes, facts, strict=True)):
                self.curves.add(lane, work.input_lens, lane_facts.segments, lane_facts.seg_offsets)

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        from litehit.spec import TraceFormat

        self._writing.close()
        self.publisher.commit()
        lanes = []
        for part, output in zip(self.parts, outputs, strict=True):
            r = output.result
            assert isinstance(r, ReplayPartResult)
            lanes.append(
                LaneStats(
                    part.instance_id,
                    r.requests,
                    r.blocks,
                    r.unique_blocks or 0,
                    r.memory_bytes or 0,
                    r.expired_blocks or 0,
                    r.shares_core_with,
                )
            )
        result = ReplayResult(
            facts_path=self.path,
            trace_format=TraceFormat(counts.trace_format),
            lines=counts.lines,
            rows=counts.rows,
            reads=counts.reads,
            facts_rows=self.rows,
            blocks=counts.blocks,
            elapsed_s=counts.seconds + time.perf_counter() - self.start,
            lanes=lanes,
            curves=self.curves,
        )
        stats = {
            "facts_rows": self.rows,
            "lanes": [{"instance_id": lane.instance_id, **_lane_stats(lane)} for lane in lanes],
            "engine_memory_bytes": sum(lane.memory_bytes for lane in lanes),
            "unique_blocks": sum(lane.unique_blocks for lane in lanes),
        }
        return Merged(result, stats)

    def settle(self) -> None:
        """Waits for the chunk being written; raises its failure (the run's, if the run failed
        later: it is an earlier chunk's)."""
        self._writing.wait()

    def close(self) -> None:
        self._writing.drain()  # before the file it writes to is closed
        self.publisher.__exit__(None, None, None)


def _lane_stats(lane: Any) -> dict[str, int]:
    return {
        "requests": lane.requests,
        "blocks": lane.blocks,
        "unique_blocks": lane.unique_blocks,
        "memory_bytes": lane.memory_bytes,
        "expired_blocks": lane.expired_blocks,
    }


class ReplayKind(TraceKind[ReplayJobSpec]):
    kind = Kind.REPLAY
    what = "replay"
    route = "/replays"
    tasks = "replay"
    spec_model = ReplayJobSpec
    public_name = "ReplayPublic"
    part_stage = Stage.LANES
    part_view_name = "LanePublic"
    part_view_doc = "One lane of a replay: progress and outcome."
    view_totals = True
    parts_description = "one row per lane: progress and outcome"
    chunk_arrays = 3  # each lane's facts of each chunk: segments, their offsets, cut reasons
    hybrid_lanes = True  # a hybrid lane's facts are its byte-step points
    shared_parts = True  # lanes of the same requests that differ only in TTL share one lane core
    cancelled = "cancelled; nothing was published"
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="facts",
            file=f"out/{FACTS_FILE}",
            media_type="text/csv",
            summary="Stream the published facts CSV",
            ready="facts exist",
            download_name="litehit_facts_{id}.csv",
        ),
    )

    def spec_of(self, config: dict[str, Any], options: BaseModel | None) -> ReplayJobSpec:
        return ReplayJobSpec(config=config)

    def plan_model(self) -> type[PartPlan]:
        return PartPlan

    def result_model(self) -> type[BaseModel]:
        return ReplayPartResult

    def parts(self, spec: ReplayJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        return [PartPlan(lane=lane.index, instance_id=lane.instance_id) for lane in plan.lanes]

    def open_part(self, spec: ReplayJobSpec, plan: ReplayPlan, part: PartPlan) -> LanePart:
        return LanePart(plan, part)

    def part_units(self, plan: ReplayPlan, parts: Sequence[PartPlan]) -> list[list[int]]:
        """Lanes of the same requests that differ only in TTL share one lane core."""
        from litehit.replay.lanes import shared_units

        return shared_units([plan.lanes[part.lane] for part in parts], plan.inputs)

    def open_unit(self, spec: ReplayJobSpec, plan: ReplayPlan, parts: Sequence[PartPlan]) -> list[PartRun]:
        if len(parts) == 1:
            return [self.open_part(spec, plan, parts[0])]
        from litehit.replay.lanes import SharedLanes

        shared = SharedLanes([plan.lanes[part.lane] for part in parts], keep_expired=plan.extended)
        return [SharedLanePart(shared, view) for view in range(len(parts))]

    def merger(
        self, spec: ReplayJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _FactsMerger:
        return _FactsMerger(runtime, plan, parts)

    def publish(self, value: Any, out: Path) -> Path:
        path: Path = value.facts_path  # the merge published it
        return path

    def extra_public_fields(self) -> dict[str, Any]:
        return {
            "facts": (
                dict[str, str] | None,
                Field(description="path (relative to storage) and URL of the published facts"),
            )
        }

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        facts = None
        if job["state"] == JobState.SUCCEEDED and job["output_path"]:
            facts = {"path": job["output_path"], "url": f"/v1{self.route}/{job['id']}/facts"}
        return {**job, "lanes": parts, "facts": facts}


KIND = ReplayKind()


def run_replay(
    spec: ReplaySpec,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    chunk_bytes: int | None = None,
) -> ReplayResult:
    """Replays spec.trace_file_path into spec.output_result_path/litehit_facts.csv, in process.

    Raises ReplayError (fail-fast: the first malformed row, unsorted timestamp, unknown instance
    or length-contract violation, in input order), ConfigError (routing impossible for the
    format) or ReplayCancelled; in every failure case nothing is published and an older facts
    file stays. The bytes do not depend on pipeline_worker_count."""
    from litehit.jobs.local import run_local
    from litehit.traces.source import CHUNK_BYTES

    job_spec = ReplayJobSpec(config=spec.model_dump(mode="json"))
    run = run_local(
        KIND,
        job_spec,
        spec,
        on_progress=on_progress,
        should_stop=should_stop,
        chunk_bytes=chunk_bytes or CHUNK_BYTES,
    )
    result: ReplayResult = run.merged.value
    return result
