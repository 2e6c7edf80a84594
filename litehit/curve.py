"""The exact hit-rate curve of each instance over ALL capacities, from 0 to the infinite plateau.

For one request, hit_blocks(C) = #{thresholds <= C}; a segment (start, run) holds thresholds
start .. start+run-1. Summed over requests, the slope of hit_blocks(C) rises by one at every
segment start and falls by one after every segment end, so one pass over the segments (a
difference array over capacities) and one over the capacities give hit_blocks at every capacity:
O(segments + largest threshold), never one projection per capacity. Both passes are the
projector's (core_c.project's curve_add and curve_points, lh_project.h).

A breakpoint is a capacity where the hit rate changes. When the rows of an instance differ in
block_bytes (facts from several configs), the per-(block size, block bytes) curves are merged on
a byte axis. A hybrid lane's byte-step rows (threshold bytes, hit blocks) are steps on the byte
axis already: each point adds its increase of hit blocks x block size at its threshold, and the
instance's curve is on the byte axis (no capacity in blocks).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from litehit.capacity import DEFAULT_TARGETS, GIB
from litehit.facts import FactsStream

__all__ = ["CurvePoint", "InstanceCurve", "IntColumn", "LaneCurves", "exact_curves"]


class IntColumn(Sequence[int]):
    """A column of ints read as Python ints, kept as an int64 array when every value fits (else a
    list): 8 bytes a value where a list of ints takes about 40, which is most of a summary's peak
    memory on a curve of millions of breakpoints."""

    __slots__ = ("_values",)

    def __init__(self, values: npt.NDArray[np.int64] | list[int]) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            part = self._values[i]
            return part.tolist() if isinstance(part, np.ndarray) else list(part)
        return int(self._values[i])

    def __iter__(self) -> Iterator[int]:
        if not isinstance(self._values, np.ndarray):
            yield from self._values
            return
        for lo in range(0, len(self._values), 1 << 16):  # a list of at most 64 Ki ints at a time
            yield from self._values[lo : lo + (1 << 16)].tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        return np.asarray(self._values, dtype=dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IntColumn({list(self)!r})" if len(self) <= 8 else f"IntColumn(<{len(self)} values>)"


@dataclass(frozen=True, slots=True)
class CurvePoint:
    capacity_bytes: int
    capacity_blocks: int | None  # None when the instance mixes block sizes in bytes
    hit_tokens: int
    hit_rate: float

    @property
    def capacity_gib(self) -> float:
        return self.capacity_bytes / GIB

    def as_dict(self) -> dict[str, Any]:
        return {
            "capacity_blocks": self.capacity_blocks,
            "capacity_bytes": self.capacity_bytes,
            "capacity_gib": self.capacity_gib,
            "hit_tokens": self.hit_tokens,
            "hit_rate": self.hit_rate,
        }


@dataclass
class InstanceCurve:
    """Breakpoint i: from capacity_bytes[i] (capacity_blocks[i]) on, hit_tokens[i] tokens hit;
    breakpoint 0 is capacity 0, the last one reaches the infinite-capacity plateau."""

    instance_id: str
    block_bytes: int | None  # bytes per block when uniform across the instance's rows
    requests: int
    input_tokens: int
    capacity_bytes: IntColumn
    capacity_blocks: IntColumn | None
    hit_tokens: npt.NDArray[np.int64]
    targets: dict[float, int] = field(default_factory=dict)  # fraction -> breakpoint index

    def __len__(self) -> int:
        return len(self.hit_tokens)

    def point(self, i: int) -> CurvePoint:
        tokens = int(self.hit_tokens[i])
        return CurvePoint(
            self.capacity_bytes[i],
            None if self.capacity_blocks is None else self.capacity_blocks[i],
            tokens,
            tokens / self.input_tokens if self.input_tokens else 0.0,
        )

    @property
    def plateau(self) -> CurvePoint:
        """The infinite-capacity value, at the smallest capacity that reaches it."""
        return self.point(len(self) - 1)

    def hit_rates(self) -> npt.NDArray[np.float64]:
        if self.input_tokens == 0:
            return np.zeros(len(self))
        return self.hit_tokens / np.float64(self.input_tokens)

    def index_reaching_hit_rate(self, hit_rate: float) -> int | None:
        """The breakpoint of the smallest capacity whose absolute hit rate (hit tokens over all
        input tokens) is at least hit_rate, exactly; None when even the plateau stays below."""
        if not 0 <= hit_rate <= 1:
            raise ValueError(f"hit rates must be in [0, 1], got {hit_rate}")
        if self.input_tokens == 0:
            return 0 if hit_rate == 0 else None
        frac = Fraction(str(hit_rate))
        need = -(-self.input_tokens * frac.numerator // frac.denominator)
        i = int(np.searchsorted(self.hit_tokens, need, side="left"))
        return i if i < len(self) else None

    def hit_tokens_at(self, capacity_bytes: int) -> int:
        """The step function itself: hit tokens at a byte capacity (for checks and plots)."""
        i = bisect.bisect_right(self.capacity_bytes, capacity_bytes) - 1  # IntColumn reads as ints
        return int(self.hit_tokens[i]) if i >= 0 else 0

    def as_dict(self) -> dict[str, Any]:
        rates = self.hit_rates().tolist()
        blocks: list[int | None] = (
            list(self.capacity_blocks) if self.capacity_blocks is not None else [None] * len(self)
        )
        return {
            "instance_id": self.instance_id,
            "block_bytes": self.block_bytes,
            "requests": self.requests,
            "total_input_tokens": self.input_tokens,
            "infinite": self.plateau.as_dict(),
            "targets": [{"fraction": f, **self.point(i).as_dict()} for f, i in sorted(self.targets.items())],
            "breakpoints": {
                "columns": ["capacity_blocks", "capacity_bytes", "capacity_gib", "hit_tokens", "hit_rate"],
                "rows": [
                    [k, b, b / GIB, t, r]
                    for k, b, t, r in zip(blocks, self.capacity_bytes, self.hit_tokens.tolist(), rates, strict=True)
                ],
            },
        }


@dataclass
class _Group:
    """The difference array of one (instance, block size, block bytes): core_c.project's curve_add
    folds each chunk's segments in as it comes (two counts a segment), and curve_points reads the
    breakpoints in one pass at the end (lh_project.h)."""

    block_size: int
    block_bytes: int
    diff: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size: int = 0  # of diff, the part the segments reach

    def add(self, segments: npt.NDArray[np.int64]) -> None:
        """Segments ((n, 2) int64: start, run) of one chunk."""
        from core_c.project import curve_add

        need = curve_add(self.diff, segments)
        if need > len(self.diff):  # doubled at least, so a run of growing thresholds copies little
            grown = np.zeros(max(need, 2 * len(self.diff)), np.int64)
            grown[: len(self.diff)] = self.diff
            self.diff = grown
            curve_add(self.diff, segments)
        self.size = max(self.size, need)

    def points(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The breakpoints: capacity 0 and every capacity in blocks where hit blocks rise, and the
        hit blocks there. It empties the group, so call it once."""
        from core_c.project import curve_points

        diff, self.diff = self.diff[: max(self.size, 1)], np.zeros(0, np.int64)
        return curve_points(diff)


@dataclass
class _Instance:
    groups: dict[tuple[int, int], _Group] = field(default_factory=dict)
    requests: int = 0
    input_tokens: int = 0
    hybrid: bool = False  # has byte-step rows
    step_bytes: list[npt.NDArray[np.uint64]] = field(default_factory=list)  # thresholds of its points
    step_tokens: list[npt.NDArray[np.int64]] = field(default_factory=list)  # hit tokens each adds


def _add_steps(
    acc: dict[int, _Instance], groups: npt.NDArray[np.int32], segs: npt.NDArray[np.int64],
    seg_offsets: npt.NDArray[np.int64], rows: npt.NDArray[np.int64], bs: npt.NDArray[np.int64],
    lens: npt.NDArray[np.int64],
) -> None:  # fmt: skip
    """The byte-step rows `rows` of a chunk: every point adds (its hit blocks - the previous
    point's) x block size hit tokens from its threshold on."""
    counts = seg_offsets[rows + 1] - seg_offsets[rows]
    seg_index = np.repeat(seg_offsets[rows], counts) + (
        np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    owner = np.repeat(rows, counts)
    first = seg_index == seg_offsets[owner]
    hits = segs[seg_index, 1]
    previous = np.where(first, 0, np.roll(hits, 1))
    tokens = (hits - previous) * bs[owner]
    thresholds = segs[seg_index, 0].view(np.uint64)
    for g in np.unique(groups[rows]).tolist():
        inst = acc.setdefault(g, _Instance())
        inst.hybrid = True
        mine = groups[rows] == g
        inst.requests += int(mine.sum())
        inst.input_tokens += int(lens[rows[mine]].sum())
        points = groups[owner] == g
        inst.step_bytes.append(thresholds[points])
        inst.step_tokens.append(tokens[points])


def _distinct_rows(keys: npt.NDArray[np.int64]) -> list[tuple[int, ...]]:
    """The distinct rows of a 2-D integer array (in no promised order). One lexicographic sort
    of the columns: np.unique(axis=0) compares rows as opaque records, several times slower."""
    if len(keys) == 0:
        return []
    if (keys == keys[0]).all():  # one lane shape in the chunk: the usual case
        return [tuple(keys[0].tolist())]
    ordered = keys[np.lexsort(keys.T[::-1])]
    first = np.ones(len(ordered), bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return [tuple(row) for row in ordered[first].tolist()]


def _check_targets(targets: Sequence[float]) -> None:
    for f in targets:
        if not 0 < f <= 1:
            raise ValueError(f"target fractions must be in (0, 1], got {f}")


class LaneCurves:
    """The curves exact_curves would read back from a replay's facts file, accumulated from the
    lanes' facts as the replay makes them (the same rows: a lane's requests in its instance and
    block shape), so a summary need not read the file again. The segments are only kept (16 B
    each) until curves() folds them: beyond MAX_SEGMENTS over all lanes nothing more is kept
    (``kept`` turns false, and the summary reads the file). Lanes with byte-step facts (hybrid)
    are not taken: read their facts file."""

    MAX_SEGMENTS = 1 << 22  # 64 MiB beside the lane cores during the replay

    def __init__(self, lanes: Sequence[tuple[str, int, int]]) -> None:
        """lanes: (instance id, block size, block bytes) of each lane."""
        self.lanes = list(lanes)
        self._chunks: list[tuple[int, int, int, npt.NDArray[np.int64]]] = []
        self._segments = 0
        self.kept = True

    def add(
        self,
        lane: int,
        input_lens: npt.NDArray[np.int64],
        segments: npt.NDArray[np.int64],
        seg_offsets: npt.NDArray[np.int64],
    ) -> None:
        """One chunk of a lane: its requests' input lengths and facts (request j's segments are
        segments[seg_offsets[j]:seg_offsets[j+1]])."""
        if not self.kept:
            return
        mine = segments[int(seg_offsets[0]) : int(seg_offsets[-1])] if len(seg_offsets) else segments[:0]
        self._segments += len(mine)
        if self._segments > self.MAX_SEGMENTS:
            self.kept, self._chunks = False, []
            return
        self._chunks.append((lane, len(input_lens), int(input_lens.sum()), mine.copy()))

    def curves(self, targets: Sequence[float] = DEFAULT_TARGETS) -> list[InstanceCurve]:
        """Exact curves of every instance with a request, sorted by instance id (bytes order),
        as exact_curves gives them from the facts file; call it once, at the end, when kept."""
        _check_targets(targets)
        if not self.kept:
            raise ValueError("the replay's facts were too many to keep: read its facts file")
        acc: dict[str, _Instance] = {}
        chunks, self._chunks = self._chunks, []
        for lane, requests, input_tokens, segments in chunks:
            name, size, nbytes = self.lanes[lane]
            inst = acc.setdefault(name, _Instance())
            inst.requests += requests
            inst.input_tokens += input_tokens
            inst.groups.setdefault((size, nbytes), _Group(size, nbytes)).add(segments)
        del chunks
        # an instance with no request has no row in the facts file, so no curve
        made = [(name.encode(), inst) for name, inst in acc.items() if inst.requests]
        del acc
        return _finish_all(made, targets)


def exact_curves(path: str | Path, targets: Sequence[float] = DEFAULT_TARGETS) -> list[InstanceCurve]:
    """Exact curves of every instance of a facts file, sorted by instance id (bytes order)."""
    _check_targets(targets)
    stream = FactsStream(path, byte_steps=True)
    acc: dict[int, _Instance] = {}
    for chunk, groups in stream:
        segs = chunk.column("segs")
        seg_offsets = chunk.column("seg_offsets")
        rows_of_seg = np.repeat(np.arange(chunk.rows), np.diff(seg_offsets))
        bs, bb, lens = chunk.column("block_size"), chunk.column("block_bytes"), chunk.column("input_len")
        step = chunk.column("step").astype(bool)
        if step.any():
            _add_steps(acc, groups, segs, seg_offsets, np.flatnonzero(step), bs, lens)
        keys = np.stack([groups.astype(np.int64), bs, bb], axis=1)[~step]
        for g, size, nbytes in _distinct_rows(keys):
            row_mask = (groups == g) & (bs == size) & (bb == nbytes) & ~step
            mine = np.flatnonzero(row_mask)
            inst = acc.setdefault(g, _Instance())
            inst.requests += len(mine)
            inst.input_tokens += int(lens[mine].sum())
            group = inst.groups.setdefault((size, nbytes), _Group(size, nbytes))
            seg_mask = row_mask[rows_of_seg]
            group.add(segs[seg_mask])
    return _finish_all([(stream.instances.names[g], inst) for g, inst in acc.items()], targets)


def _finish_all(instances: list[tuple[bytes, _Instance]], targets: Sequence[float]) -> list[InstanceCurve]:
    """The instances' curves sorted by instance id (bytes order); several instances are finished
    side by side (their folds are numpy sums and bincounts, which release the GIL)."""
    if len(instances) > 1:
        with ThreadPoolExecutor(max_workers=min(len(instances), os.cpu_count() or 1)) as pool:
            curves = list(pool.map(lambda item: _finish(item[0], item[1], targets), instances))
    else:
        curves = [_finish(name, inst, targets) for name, inst in instances]
    return sorted(curves, key=lambda c: c.instance_id.encode())


def _byte_events(inst: _Instance) -> dict[int, int]:
    """Byte capacity -> hit tokens gained there: every RLE group's breakpoints at blocks x block
    bytes, and every byte-step point at its threshold."""
    events: dict[int, int] = {0: 0}
    if inst.step_bytes:
        unique, at = np.unique(np.concatenate(inst.step_bytes), return_inverse=True)
        sums = np.zeros(len(unique), np.int64)
        np.add.at(sums, at, np.concatenate(inst.step_tokens))
        for b, t in zip(unique.tolist(), sums.tolist(), strict=True):
            events[b] = events.get(b, 0) + t
    for group in inst.groups.values():
        caps, hits = group.points()
        hits *= group.block_size
        for c, gain in zip(caps[1:].tolist(), np.diff(hits).tolist(), strict=True):
            b = c * group.block_bytes
            events[b] = events.get(b, 0) + gain
    return events


def _finish(name: bytes, inst: _Instance, targets: Sequence[float]) -> InstanceCurve:
    blocks: IntColumn | None
    block_bytes: int | None
    if len(inst.groups) == 1 and not inst.hybrid:
        (group,) = inst.groups.values()
        caps, values = group.points()
        values *= group.block_size
        blocks = IntColumn(caps)
        capacity_bytes = IntColumn(
            caps * group.block_bytes
            if len(caps) and caps[-1] < (1 << 62) // max(group.block_bytes, 1)
            else [c * group.block_bytes for c in blocks]
        )
        block_bytes = group.block_bytes
    else:  # several block shapes, or a hybrid lane's byte steps: the byte axis
        events = _byte_events(inst)
        ordered = sorted(events)
        values = np.cumsum([events[b] for b in ordered]).astype(np.int64)
        capacity_bytes = IntColumn(ordered)
        blocks, block_bytes = None, None
    curve = InstanceCurve(
        instance_id=name.decode("utf-8", "replace"),
        block_bytes=block_bytes,
        requests=inst.requests,
        input_tokens=inst.input_tokens,
        capacity_bytes=capacity_bytes,
        capacity_blocks=blocks,
        hit_tokens=values,
    )
    plateau = int(values[-1])
    for f in targets:
        # smallest capacity whose hit tokens reach f x the plateau (same denominator), exactly
        frac = Fraction(str(f))
        need = -(-plateau * frac.numerator // frac.denominator)
        curve.targets[f] = int(np.searchsorted(values, need, side="left"))
    return curve
