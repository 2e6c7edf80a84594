"""The live curve of an online instance: the exact hit blocks at ANY capacity of every request it
has answered, beside its configured slots.

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

__all__ = ["LiveCurve"]


class LiveCurve:
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
        caps, hits = self.breakpoints()
        plateau = int(hits[-1])
        if plateau == 0:
            return None
        q = Fraction(repr(float(fraction)))
        need = -(-plateau * q.numerator // q.denominator)
        return int(caps[int(np.searchsorted(hits, need, side="left"))])

    @property
    def memory_bytes(self) -> int:
        return int(self.delta.nbytes)

    # --- snapshot ---

    def state(self) -> dict[str, Any]:
        used = len(self.delta)
        while used > 1 and self.delta[used - 1] == 0:
            used -= 1
        raw = self.delta[:used].astype("<i8").tobytes()
        return {"encoding": "zlib-int64le-base64", "delta": base64.b64encode(zlib.compress(raw)).decode()}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> LiveCurve:
        """The curve of a snapshot (an empty one without)."""
        if not state or state.get("encoding") != "zlib-int64le-base64":
            return cls()
        raw = zlib.decompress(base64.b64decode(state["delta"]))
        return cls(np.frombuffer(raw, dtype="<i8").astype(np.int64))
