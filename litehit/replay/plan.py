"""Planning a replay: lanes and routing from the spec, then per chunk the routed, normalized
requests of every lane and the order of the facts rows.

A chunk plan is plain numpy arrays and bytes, so it can be processed in place (the CLI) or
written to per-lane files for lane tasks running elsewhere (the service).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt

import core_c
from core_c.scan import ROW_READ, ScanResult
from litehit.categories import CategoryTable
from litehit.errors import ConfigError, ConfigIssue, ReplayError
from litehit.spec import ReplaySpec, TraceFormat, routing_issues
from litehit.traces.format_table import INSTANCELESS
from litehit.traces.scan import ParsedChunk

__all__ = [
    "ChunkPlan",
    "LaneAssigner",
    "LaneRouter",
    "LaneSpec",
    "LaneWork",
    "ReplayPlan",
    "Routing",
    "make_plan",
    "plan_chunk",
]

Int64Array = npt.NDArray[np.int64]


class Routing(StrEnum):
    FANOUT = "fanout"  # every read to every lane, in config order
    OVERRIDE = "override"  # every read to one lane
    TRACE = "trace"  # the row's own instance_id picks the lane
    ROUTED = "routed"  # a router picks one lane per request in each of its groups (litehit.routes)


@dataclass(frozen=True, slots=True)
class LaneSpec:
    index: int
    instance_id: str
    block_size: int  # analysis tokens per block
    block_bytes: int
    ttl_ns: int
    prefix_hash: bool
    linear_charge: int = 0  # hybrid lane: bytes of a saved linear-attention state (0: Full-only)
    step_blocks: int = 0  # hybrid lane: blocks between saved states

    @property
    def hybrid(self) -> bool:
        """A lane of Full blocks and linear-attention states (byte-step facts, lh_hybrid.h)."""
        return self.linear_charge > 0


class LaneAssigner(Protocol):
    """The lanes of each read, chunk after chunk in input order (it may keep state across chunks)."""

    def assign(self, rows: ScanResult, reads: Int64Array, keys: Int64Array, offsets: Int64Array) -> Int64Array:
        """(groups, reads): the lane of read j in each group, given the raw rows, the reads' row
        numbers and their lane keys (read j's are keys[offsets[j]:offsets[j + 1]])."""
        ...


class LaneRouter(Protocol):
    """A config whose lanes are replicas of its one instance, chosen by routers: every read goes
    to one lane of each group (lane g * replicas + j is replica j of group g)."""

    def lanes(self, template: LaneSpec) -> tuple[LaneSpec, ...]: ...

    def start(self, fmt: TraceFormat) -> LaneAssigner:
        """A fresh assignment for a pass over a trace of `fmt` (ConfigError when it cannot route it)."""
        ...


@dataclass(frozen=True)
class ReplayPlan:
    path: str
    fmt: TraceFormat
    trace_block_size: int
    lanes: tuple[LaneSpec, ...]
    routing: Routing
    target: int  # the OVERRIDE lane
    extended: bool  # extended facts columns
    lane_by_instance: dict[str, int]
    inputs: tuple[int, ...]  # lane i has the requests of lane inputs[i] (lane_inputs)
    categories: CategoryTable = field(default_factory=CategoryTable)  # grows as chunks are planned
    assigner: LaneAssigner | None = None  # ROUTED: the routers' state across chunks

    @property
    def lane_ids(self) -> bytes:
        return b"".join(lane.instance_id.encode() for lane in self.lanes)

    @property
    def lane_id_offsets(self) -> Int64Array:
        sizes = [len(lane.instance_id.encode()) for lane in self.lanes]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def lane_inputs(lanes: Sequence[LaneSpec], routing: Routing) -> tuple[int, ...]:
    """For each lane, the first lane whose normalized requests are the same as its own: in a
    fanout every lane sees every read, so lanes of one block size and key hashing (several TTLs,
    say) get the same keys; they share one LaneWork per chunk (normalized once) and one parse-stage
    file. Under any other routing each lane has its own reads."""
    if routing is not Routing.FANOUT:
        return tuple(range(len(lanes)))
    first: dict[tuple[int, bool], int] = {}
    return tuple(first.setdefault((lane.block_size, lane.prefix_hash), i) for i, lane in enumerate(lanes))


def make_plan(spec: ReplaySpec, fmt: TraceFormat, path: str | None = None) -> ReplayPlan:
    """Lanes in config order and the routing rule (decision: instance-less rows go to the only
    lane or follow override/fanout; several lanes without a rule is a config error)."""
    lanes = tuple(
        LaneSpec(
            index=i,
            instance_id=inst.instance_id,
            block_size=inst.block_size,
            block_bytes=spec.block_bytes_of(inst),
            ttl_ns=spec.group_of(inst).ttl_ns,
            prefix_hash=spec.group_of(inst).prefix_hash_for(fmt),
            linear_charge=inst.linear_charge_bytes,
            step_blocks=inst.linear_step_blocks,
        )
        for i, inst in enumerate(spec.instances)
    )
    router: LaneRouter | None = getattr(spec, "lane_router", None)
    assigner = None
    if router is not None:
        if len(lanes) != 1:
            raise ConfigError([ConfigIssue("instances", len(lanes), "routing replicas needs exactly one instance")])
        lanes = router.lanes(lanes[0])
        assigner = router.start(fmt)
    by_id = {lane.instance_id: lane.index for lane in lanes}
    if router is not None:
        routing, target = Routing.ROUTED, -1
    elif spec.fanout_all_instances:
        routing, target = Routing.FANOUT, -1
    elif spec.override_instance_id:
        routing, target = Routing.OVERRIDE, by_id[spec.override_instance_id]
    elif fmt in INSTANCELESS:
        issues = routing_issues(spec, fmt)
        if issues:
            raise ConfigError(issues)
        routing, target = Routing.OVERRIDE, 0
    else:
        routing, target = Routing.TRACE, -1
    return ReplayPlan(
        path=path if path is not None else spec.trace_file_path,
        fmt=fmt,
        trace_block_size=spec.block_size,
        lanes=lanes,
        routing=routing,
        target=target,
        extended=spec.facts_format == "extended",
        lane_by_instance=by_id,
        assigner=assigner,
        inputs=lane_inputs(lanes, routing),
    )


@dataclass(frozen=True, slots=True)
class LaneWork:
    """Normalized requests of one lane in one chunk, in input order."""

    keys: Int64Array
    offsets: Int64Array
    input_lens: Int64Array
    timestamps: Int64Array
    categories: npt.NDArray[np.int32]  # ids in the plan's CategoryTable

    @property
    def requests(self) -> int:
        return len(self.input_lens)


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """Facts row k is source row out_src[k] (a row of this chunk) seen by lane out_lane[k], the
    out_pos[k]-th request of that lane in this chunk."""

    index: int
    ids: bytes  # trace ids of every row of the chunk
    id_offsets: Int64Array
    timestamps: Int64Array
    out_src: Int64Array
    out_lane: npt.NDArray[np.int32]
    out_pos: Int64Array
    lanes: tuple[LaneWork, ...]
    rows: int  # records scanned (reads + writes)
    reads: int
    raw_blocks: int  # keys of the read rows before normalization
    last_timestamp: int | None
    lines: int
    source_offset: int


def _trace_id(parsed: ParsedChunk, row: int) -> str:
    """A row's trace id for a one-line message (control characters escaped)."""
    r = parsed.rows
    text = r.ids[r.id_offsets[row] : r.id_offsets[row + 1]].decode("utf-8", "replace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def plan_chunk(plan: ReplayPlan, parsed: ParsedChunk, prev_timestamp: int | None) -> ChunkPlan:
    """Routes and normalizes the reads of a chunk. The first failure in input order (malformed
    row, unsorted timestamp, unknown instance, length contract) raises ReplayError."""
    r = parsed.rows
    errors: list[tuple[int, str]] = []  # (line, reason)
    if r.error_line:
        errors.append((r.error_line, f"failed to load/replay trace: {plan.path}:{r.error_line}: {r.error}"))
    ts = r.timestamp
    if len(ts):
        before = np.empty_like(ts)
        before[0] = ts[0] if prev_timestamp is None else prev_timestamp
        before[1:] = ts[:-1]
        bad = np.flatnonzero(ts < before)
        if len(bad):
            row = int(bad[0])
            errors.append(
                (
                    int(r.line[row]),
                    f"trace is not sorted by timestamp_ns at trace_id[{_trace_id(parsed, row)}]",
                )
            )
    reads = np.flatnonzero(r.kind == ROW_READ)
    row_categories = plan.categories.ids_for(r, plan.fmt)
    n_lanes = len(plan.lanes)
    if plan.routing is Routing.ROUTED:
        return _routed_chunk(plan, parsed, reads, row_categories, errors, prev_timestamp)
    if plan.routing is Routing.FANOUT:
        out_src = np.repeat(reads, n_lanes)
        out_lane = np.tile(np.arange(n_lanes, dtype=np.int32), len(reads))
        out_pos = np.repeat(np.arange(len(reads), dtype=np.int64), n_lanes)
        lane_rows = [reads] * n_lanes
    else:
        if plan.routing is Routing.OVERRIDE:
            lane_of = np.full(len(reads), plan.target, dtype=np.int32)
        else:
            table = np.array([plan.lane_by_instance.get(name, -1) for name in r.instance_names] + [-1], dtype=np.int32)
            lane_of = table[r.instance[reads]]
            unknown = np.flatnonzero(lane_of < 0)
            if len(unknown):
                row = int(reads[unknown[0]])
                name = r.instance_names[r.instance[row]]
                errors.append((int(r.line[row]), f"unknown instance[{name}] at trace_id[{_trace_id(parsed, row)}]"))
                cut = int(unknown[0])
                reads, lane_of = reads[:cut], lane_of[:cut]
        out_src = reads
        out_lane = lane_of
        out_pos = np.zeros(len(reads), dtype=np.int64)
        lane_rows = []
        for lane_index in range(n_lanes):
            mine = np.flatnonzero(lane_of == lane_index)
            out_pos[mine] = np.arange(len(mine))
            lane_rows.append(reads[mine])
    works: list[LaneWork] = []
    made: dict[int, LaneWork] = {}  # lane position -> its work, for the lanes that share it
    for i, (lane, rows) in enumerate(zip(plan.lanes, lane_rows, strict=True)):
        source = plan.inputs[i]
        if source != i:  # the same requests as an earlier lane's (a fanout): shared
            if source in made:
                works.append(made[source])
            continue  # else that lane's normalization failed, and its error stands for both
        try:
            batch = core_c.normalize_batch(
                r.keys,
                r.key_offsets,
                r.input_len,
                lane.block_size,
                rows=rows,
                trace_block_size=plan.trace_block_size,
                prefix_hash=lane.prefix_hash,
            )
        except core_c.CoreError as exc:
            row = int(rows[exc.index or 0])
            errors.append((int(r.line[row]), f"invalid request trace_id[{_trace_id(parsed, row)}]: {exc.message}"))
            continue
        made[i] = LaneWork(batch.keys, batch.offsets, batch.input_lens, ts[rows], row_categories[rows])
        works.append(made[i])
    _raise_first(plan, errors)
    return _chunk_plan(parsed, reads, out_src, out_lane, out_pos, works, prev_timestamp)


def _raise_first(plan: ReplayPlan, errors: list[tuple[int, str]]) -> None:
    if errors:
        line, reason = min(errors)
        if not reason.startswith("failed to load/replay trace"):
            reason = f"{reason} ({plan.path}:{line})"
        raise ReplayError(reason, path=plan.path, line=line)


def _chunk_plan(
    parsed: ParsedChunk,
    reads: Int64Array,
    out_src: Int64Array,
    out_lane: npt.NDArray[np.int32],
    out_pos: Int64Array,
    works: list[LaneWork],
    prev_timestamp: int | None,
) -> ChunkPlan:
    r = parsed.rows
    ts = r.timestamp
    read_keys = r.key_offsets[reads + 1] - r.key_offsets[reads]
    return ChunkPlan(
        index=parsed.index,
        ids=r.ids,
        id_offsets=r.id_offsets,
        timestamps=ts,
        out_src=out_src.astype(np.int64),
        out_lane=out_lane.astype(np.int32),
        out_pos=out_pos,
        lanes=tuple(works),
        rows=len(ts),
        reads=len(reads),
        raw_blocks=int(read_keys.sum()),
        last_timestamp=int(ts[-1]) if len(ts) else prev_timestamp,
        lines=r.lines,
        source_offset=parsed.source_offset,
    )


def _gather(keys: Int64Array, offsets: Int64Array, picked: Int64Array) -> tuple[Int64Array, Int64Array]:
    """The key runs of the picked requests, concatenated, and their offsets."""
    starts = offsets[picked]
    lengths = offsets[picked + 1] - starts
    out_offsets = np.zeros(len(picked) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    at = np.arange(int(out_offsets[-1]), dtype=np.int64) + np.repeat(starts - out_offsets[:-1], lengths)
    return keys[at], out_offsets


def _routed_chunk(
    plan: ReplayPlan,
    parsed: ParsedChunk,
    reads: Int64Array,
    row_categories: npt.NDArray[np.int32],
    errors: list[tuple[int, str]],
    prev_timestamp: int | None,
) -> ChunkPlan:
    """ROUTED: the reads normalized once with the replicas' settings (they are identical), each
    sent to one lane of every group by the plan's assigner; facts rows per read in group order."""
    r = parsed.rows
    template = plan.lanes[0]
    try:
        batch = core_c.normalize_batch(
            r.keys,
            r.key_offsets,
            r.input_len,
            template.block_size,
            rows=reads,
            trace_block_size=plan.trace_block_size,
            prefix_hash=template.prefix_hash,
        )
    except core_c.CoreError as exc:
        row = int(reads[exc.index or 0])
        errors.append((int(r.line[row]), f"invalid request trace_id[{_trace_id(parsed, row)}]: {exc.message}"))
        _raise_first(plan, errors)
        raise AssertionError("unreachable") from None
    _raise_first(plan, errors)
    assert plan.assigner is not None
    lane_of = plan.assigner.assign(r, reads, batch.keys, batch.offsets)  # (groups, reads)
    groups = lane_of.shape[0]
    out_lane = np.ascontiguousarray(lane_of.T).reshape(-1).astype(np.int32)  # read by read, groups in order
    out_src = np.repeat(reads, groups)
    read_at = np.repeat(np.arange(len(reads), dtype=np.int64), groups)
    order = np.argsort(out_lane, kind="stable")
    counts = np.bincount(out_lane, minlength=len(plan.lanes))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out_pos = np.empty(len(out_lane), dtype=np.int64)
    out_pos[order] = np.arange(len(out_lane), dtype=np.int64) - np.repeat(starts, counts)
    works: list[LaneWork] = []
    for lane in range(len(plan.lanes)):
        picked = read_at[order[starts[lane] : starts[lane] + counts[lane]]]
        keys, offsets = _gather(batch.keys, batch.offsets, picked)
        rows = reads[picked]
        works.append(LaneWork(keys, offsets, batch.input_lens[picked], r.timestamp[rows], row_categories[rows]))
    return _chunk_plan(parsed, reads, out_src.astype(np.int64), out_lane, out_pos, works, prev_timestamp)
