"""The facts of each lane in memory, in trace order: what the tier split, the prefill model and the
planner evaluate configuration after configuration without reading the file again.

A lane is one instance_id of the facts file. Memory: five numbers per row plus two per curve
segment (a million rows of two segments is about 70 MB). A hybrid lane's rows are byte steps: its
"segments" are its points (min_total_capacity_bytes as int64 bits, hit_blocks), ``step`` marks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from litehit.errors import FactsError
from litehit.facts import FactsStream

__all__ = ["LaneFacts", "load_lanes"]

Int64Array = npt.NDArray[np.int64]


@dataclass
class LaneFacts:
    """Rows of one lane: row r's curve is segs[seg_offsets[r] : seg_offsets[r + 1]] (start, run)."""

    instance_id: str
    input_len: Int64Array
    block_size: Int64Array
    block_bytes: Int64Array
    timestamp: Int64Array
    seg_offsets: Int64Array
    segs: Int64Array  # (n_segs, 2)
    step: npt.NDArray[np.bool_] | None = None  # per row: a byte-step row (None: none is)

    @property
    def hybrid(self) -> bool:
        """A hybrid lane: its rows are byte steps (capacities are total bytes, no block count)."""
        return self.step is not None and bool(self.step.any())

    @property
    def requests(self) -> int:
        return len(self.input_len)

    @property
    def input_tokens(self) -> int:
        return int(self.input_len.sum())

    def uniform(self) -> tuple[int, int] | None:
        """(block_size, block_bytes) when every row of the lane has the same, else None."""
        if self.requests == 0:
            return None
        bs, bb = int(self.block_size[0]), int(self.block_bytes[0])
        if (self.block_size == bs).all() and (self.block_bytes == bb).all():
            return bs, bb
        return None

    def duration_s(self) -> float:
        """Seconds from the lane's first request to its last (0 for one request)."""
        if self.requests < 2:
            return 0.0
        return float(int(self.timestamp.max()) - int(self.timestamp.min())) / 1e9


@dataclass
class _Parts:
    input_len: list[Int64Array] = field(default_factory=list)
    block_size: list[Int64Array] = field(default_factory=list)
    block_bytes: list[Int64Array] = field(default_factory=list)
    timestamp: list[Int64Array] = field(default_factory=list)
    counts: list[Int64Array] = field(default_factory=list)
    segs: list[Int64Array] = field(default_factory=list)
    step: list[npt.NDArray[np.bool_]] = field(default_factory=list)

    def lane(self, name: str, path: str) -> LaneFacts:
        def cat(parts: list[Int64Array]) -> Int64Array:
            return np.concatenate([np.empty(0, np.int64), *parts])

        counts = cat(self.counts)
        offsets = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        segs = np.concatenate([np.empty((0, 2), np.int64), *self.segs])
        step = np.concatenate([np.empty(0, np.bool_), *self.step])
        if step.any() and not step.all():
            raise FactsError(
                path, 0, f"lane {name} mixes byte-step (hybrid) rows and Full-only rows: a tier split needs one kind"
            )
        return LaneFacts(
            name,
            cat(self.input_len),
            cat(self.block_size),
            cat(self.block_bytes),
            cat(self.timestamp),
            offsets,
            segs,
            step if step.any() else None,
        )


def _segment_rows(seg_offsets: Int64Array, rows: Int64Array) -> Int64Array:
    """Indices of the segments of `rows`, in order (each row's segments in its own order)."""
    counts = seg_offsets[rows + 1] - seg_offsets[rows]
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, np.int64)
    starts = np.repeat(seg_offsets[rows], counts)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    out: Int64Array = starts + within
    return out


def load_lanes(path: str | Path, *, byte_steps: bool = False) -> list[LaneFacts]:
    """Every lane of a facts file, in order of first appearance (FactsError on a bad row).
    byte_steps: hybrid lanes' rows are read too (the tier split); else the first is refused."""
    stream = FactsStream(path, byte_steps=byte_steps, what="this command")
    parts: list[_Parts] = []
    for chunk, groups in stream:
        while len(parts) < len(stream.instances):
            parts.append(_Parts())
        columns = {name: chunk.column(name) for name in ("input_len", "block_size", "block_bytes", "timestamp")}
        seg_offsets = chunk.column("seg_offsets")
        segs = chunk.column("segs")
        step = chunk.column("step").astype(np.bool_)
        order = np.argsort(groups, kind="stable")
        sorted_groups = groups[order]
        bounds = np.searchsorted(sorted_groups, np.arange(len(stream.instances) + 1))
        for g in range(len(stream.instances)):
            rows = order[bounds[g] : bounds[g + 1]].astype(np.int64)
            if len(rows) == 0:
                continue
            p = parts[g]
            p.input_len.append(columns["input_len"][rows])
            p.block_size.append(columns["block_size"][rows])
            p.block_bytes.append(columns["block_bytes"][rows])
            p.timestamp.append(columns["timestamp"][rows])
            p.counts.append(seg_offsets[rows + 1] - seg_offsets[rows])
            p.segs.append(segs[_segment_rows(seg_offsets, rows)])
            p.step.append(step[rows])
    names = [n.decode("utf-8", "replace") for n in stream.instances.names]
    return [p.lane(name, str(path)) for p, name in zip(parts, names, strict=True)]
