"""The live curve of an online instance: the exact hit blocks at ANY capacity of every request it
has answered, beside its configured slots. LiveCurve is a Full-only instance's (capacities in
blocks), StepCurve a hybrid one's (total capacities in bytes).

A request's facts are thresholds (segments (start, run): thresholds start .. start + run - 1);
it hits hit_blocks(C) = #{thresholds <= C} blocks at capacity C. Summed over requests that is
H(C) = sum over t <= C of n(t), n(t) the number of thresholds equal to t. The instance keeps n as
a difference array d (d[start] += 1, d[start + run] -= 1 per segment; n = cumsum(d)): O(1) per
segment to add, memory O(largest threshold) <= O(distinct blocks tracked). Reads (a curve, an
answer) take two prefix sums. Its state is part of the counters' snapshot (zlib-compressed
little-endian int64, base64), so it survives an owner's restart as the counters do.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["LiveCurve", "StepCurve"]


def _capacity_reaching(caps: npt.NDArray[Any], hits: npt.NDArray[np.int64], fraction: float) -> int | None:
    """The smallest capacity whose hits reach fraction of the plateau, exactly (ceil(fraction x
    plateau) blocks), from breakpoints; None before any hit."""
    plateau = int(hits[-1])
    if plateau == 0:
        return None
    q = Fraction(repr(float(fraction)))
    need = -(-plateau * q.numerator // q.denominator)
    return int(caps[int(np.searchsorted(hits, need, side="left"))])


def _pack(values: npt.NDArray[Any], dtype: str) -> str:
    return base64.b64encode(zlib.compress(values.astype(dtype).tobytes())).decode()


def _unpack(text: str, dtype: str) -> npt.NDArray[Any]:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=dtype)


class LiveCurve:
    unit = "blocks"

    def __init__(self, delta: npt.NDArray[np.int64] | None = None) -> None:
        self.delta = np.zeros(1, np.int64) if delta is None else delta

    # --- updates ---

    def add(self, segments: npt.NDArray[np.int64]) -> None:
        """Adds the thresholds of a batch's facts, (n_segs, 2) start/run pairs."""
        if len(segments) == 0:
            return
        starts = segments[:, 0]
        ends = starts + segments[:, 1]
        size = int(ends.max()) + 1
        if size > len(self.delta):
            grown = np.zeros(max(size, 2 * len(self.delta)), np.int64)
            grown[: len(self.delta)] = self.delta
            self.delta = grown
        self.delta[:size] += np.bincount(starts, minlength=size)[:size] - np.bincount(ends, minlength=size)[:size]

    # --- reads ---

    def counts(self) -> npt.NDArray[np.int64]:
        """n(t): thresholds equal to t, for t = 0 .. largest."""
        out: npt.NDArray[np.int64] = np.cumsum(self.delta)
        return out

    def cumulative(self) -> npt.NDArray[np.int64]:
        """H(C) for C = 0 .. largest threshold (then constant)."""
        out: npt.NDArray[np.int64] = np.cumsum(self.counts())
        return out

    def hit_blocks(self, capacities: Sequence[int | None]) -> list[int]:
        """H at each capacity in blocks (None: infinite)."""
        h = self.cumulative()
        last = len(h) - 1
        return [int(h[last if c is None else min(c, last)]) for c in capacities]

    def breakpoints(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(capacities, hit blocks): from capacities[j] blocks on, hits[j] blocks; [0] is (0, 0)."""
        n = self.counts()
        at = np.nonzero(n)[0].astype(np.int64)
        return np.concatenate([[0], at]), np.concatenate([[0], np.cumsum(n[at])]).astype(np.int64)

    def capacity_reaching(self, fraction: float) -> int | None:
        """The smallest capacity (blocks) whose hits reach fraction of the plateau, exactly
        (ceil(fraction x plateau) blocks); None before any hit."""
        return _capacity_reaching(*self.breakpoints(), fraction)

    @property
    def memory_bytes(self) -> int:
        return int(self.delta.nbytes)

    # --- snapshot ---

    def state(self) -> dict[str, Any]:
        used = len(self.delta)
        while used > 1 and self.delta[used - 1] == 0:
            used -= 1
        return {"encoding": "zlib-int64le-base64", "delta": _pack(self.delta[:used], "<i8")}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> LiveCurve:
        """The curve of a snapshot (an empty one without)."""
        if not state or state.get("encoding") != "zlib-int64le-base64":
            return cls()
        return cls(_unpack(state["delta"], "<i8").astype(np.int64))


class StepCurve:
    """The live curve of a hybrid instance. A request's fact is its byte-step points (c_j, h_j),
    strictly increasing in both: it hits h_j blocks from c_j total bytes on. Summed over requests,
    H(C) = sum of the increments h_j - h_(j-1) at thresholds c_j <= C. The curve keeps the
    increments per distinct threshold, sorted (uint64 bytes, int64 blocks); a batch's increments
    wait in a pending list and are merged when it outgrows the merged part (or on a read), so an
    update costs O(log) amortized per point. Memory O(distinct byte thresholds)."""

    unit = "bytes"

    def __init__(self, caps: npt.NDArray[np.uint64] | None = None, incs: npt.NDArray[np.int64] | None = None) -> None:
        self.caps = np.zeros(0, np.uint64) if caps is None else caps
        self.incs = np.zeros(0, np.int64) if incs is None else incs
        self._pending: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]] = []
        self._pending_points = 0

    # --- updates ---

    def add(self, points: npt.NDArray[np.uint64], point_offsets: npt.NDArray[np.int64]) -> None:
        """Adds a batch's facts (core_c.hybrid.HybridFacts: points (m, 2), offsets per request)."""
        if len(points) == 0:
            return
        hits = points[:, 1].astype(np.int64)
        incs = np.diff(hits, prepend=np.int64(0))
        firsts = point_offsets[:-1][np.diff(point_offsets) > 0]  # each request starts from 0 hits
        incs[firsts] = hits[firsts]
        self._pending.append((points[:, 0].astype(np.uint64), incs))
        self._pending_points += len(incs)
        if self._pending_points > max(4096, len(self.caps)):
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        caps = np.concatenate([self.caps, *(c for c, _ in self._pending)])
        incs = np.concatenate([self.incs, *(i for _, i in self._pending)])
        self._pending, self._pending_points = [], 0
        order = np.argsort(caps, kind="stable")
        caps, incs = caps[order], incs[order]
        starts = np.flatnonzero(np.concatenate([[True], caps[1:] != caps[:-1]]))
        self.caps, self.incs = caps[starts], np.add.reduceat(incs, starts) if len(incs) else incs

    # --- reads ---

    def breakpoints(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """(capacities in bytes, hit blocks): from capacities[j] bytes on, hits[j] blocks; [0] is
        (0, 0)."""
        self._merge()
        return (
            np.concatenate([np.zeros(1, np.uint64), self.caps]),
            np.concatenate([np.zeros(1, np.int64), np.cumsum(self.incs)]),
        )

    def hit_blocks(self, capacities: Sequence[int | None]) -> list[int]:
        """H at each total capacity in bytes (None: infinite)."""
        caps, hits = self.breakpoints()
        out = []
        for c in capacities:
            at = len(caps) if c is None else int(np.searchsorted(caps, np.uint64(min(c, 2**64 - 1)), side="right"))
            out.append(int(hits[at - 1]))
        return out

    def capacity_reaching(self, fraction: float) -> int | None:
        """The smallest total capacity (bytes) whose hits reach fraction of the plateau."""
        return _capacity_reaching(*self.breakpoints(), fraction)

    @property
    def memory_bytes(self) -> int:
        return int(self.caps.nbytes + self.incs.nbytes) + 16 * self._pending_points

    # --- snapshot ---

    def state(self) -> dict[str, Any]:
        self._merge()
        return {
            "encoding": "zlib-steps-u64le-i64le-base64",
            "caps": _pack(self.caps, "<u8"),
            "incs": _pack(self.incs, "<i8"),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> StepCurve:
        """The curve of a snapshot (an empty one without, or of another kind)."""
        if not state or state.get("encoding") != "zlib-steps-u64le-i64le-base64":
            return cls()
        return cls(_unpack(state["caps"], "<u8").astype(np.uint64), _unpack(state["incs"], "<i8").astype(np.int64))
