"""A hybrid lane of the LiteHit core (lh_hybrid.h): Full blocks and Linear (linear-attention /
Mamba) states in one byte-weighted recency pool; each request's fact is its byte-step points
(min_total_capacity_bytes, hit_blocks), exact at every total byte capacity.

**Usage**::

    with HybridLane(full_charge=16384, linear_charge=4096, step_blocks=3) as lane:
        lane.process([1, 2, 3, 4])          # -> ()                          (all cold)
        lane.process([1, 2, 3, 4])          # -> ((53248, 3), (73728, 4))
    project_steps(((53248, 3), (73728, 4)), 60000)    # -> 3

Not thread-safe: one thread owns a lane.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, batch_args, ptr
from core_c._core import ffi, lib
from core_c._handle import CHandle
from core_c.errors import new_error_buffer, raise_for_status

__all__ = [
    "HybridFacts",
    "HybridLane",
    "HybridStats",
    "StepFact",
    "project_steps",
    "project_steps_batch",
    "project_steps_infinite",
]

StepFact = tuple[tuple[int, int], ...]
U64Array = npt.NDArray[np.uint64]
U64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class HybridStats:
    unique_blocks: int  # alive Full objects
    resident_linear: int  # alive Linear states
    resident_bytes: int  # their bytes
    expired_blocks: int  # cumulative Full objects expired by the TTL
    positions: int
    epochs: int
    compactions: int
    memory_bytes: int
    requests: int
    accesses: int


@dataclass(frozen=True, slots=True)
class HybridFacts:
    """Facts of a batch: request i's points are points[point_offsets[i]:point_offsets[i+1]], rows of
    (min_total_capacity_bytes, hit_blocks), uint64."""

    points: U64Array
    point_offsets: Int64Array

    def __len__(self) -> int:
        return len(self.point_offsets) - 1

    def request(self, i: int) -> StepFact:
        rows = self.points[self.point_offsets[i] : self.point_offsets[i + 1]]
        return tuple((int(c), int(h)) for c, h in rows)


class HybridLane(CHandle):
    """A hybrid lane: ``full_charge`` bytes a Full block (> 0), ``linear_charge`` bytes a Linear
    state (0: the Full-only byte mode), a state every ``step_blocks`` blocks and at each request's
    tail, and an optional TTL (``ttl_ns`` > 0: alive iff the age of the writing request < ttl)."""

    def __init__(self, *, full_charge: int, linear_charge: int, step_blocks: int, ttl_ns: int = 0) -> None:
        for name, value in (
            ("full_charge", full_charge),
            ("linear_charge", linear_charge),
            ("step_blocks", step_blocks),
        ):
            if isinstance(value, bool) or not 0 <= int(value) <= U64_MAX:
                raise ValueError(f"{name} must be an integer 0 .. 2^64 - 1, got {value!r}")
        self.ttl_ns = int(ttl_ns)
        config = ffi.new("lh_hybrid_config *")
        config.full_charge = int(full_charge)
        config.linear_charge = int(linear_charge)
        config.step_blocks = int(step_blocks)
        config.ttl_ns = self.ttl_ns
        out = ffi.new("lh_hybrid **")
        err = new_error_buffer()
        raise_for_status(lib.lh_hybrid_create(out, config, err, lib.LH_ERR_LEN), err)
        self._own(out[0], lib.lh_hybrid_destroy)

    def process(self, keys: Iterable[int] | npt.NDArray[Any], timestamp_ns: int = 0) -> StepFact:
        """Replays one request and returns its byte-step points."""
        arr = as_int64(keys)
        facts = self.process_batch(arr, np.array([0, len(arr)], dtype=np.int64), np.array([timestamp_ns], np.int64))
        return facts.request(0)

    def process_batch(self, keys: Int64Array, offsets: Int64Array, timestamps: Int64Array | None = None) -> HybridFacts:
        """Replays requests keys[offsets[i]:offsets[i+1]] (at timestamps[i]) in order.

        On failure raises CoreError with ``index`` = the failing request and ``partial`` = the
        facts of the requests before it (committed); the failing one changed nothing."""
        handle = self._handle()
        keys, offsets, ts, n, room = batch_args(keys, offsets, timestamps, timed=self.ttl_ns > 0)
        points = np.empty((room, 2), dtype=np.uint64)
        point_offsets = np.zeros(n + 1, dtype=np.int64)
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        status = lib.lh_hybrid_process_batch(
            handle,
            ptr("int64_t[]", keys),
            len(keys),
            ptr("int64_t[]", offsets),
            ffi.NULL if ts is None else ptr("int64_t[]", ts),
            n,
            ptr("uint64_t[]", points),
            ptr("int64_t[]", point_offsets),
            n_done,
            err,
            lib.LH_ERR_LEN,
        )
        done = int(n_done[0])
        facts = HybridFacts(points[: point_offsets[done]], point_offsets[: done + 1])
        raise_for_status(status, err, index=done, partial=facts)
        return facts

    def advance_time(self, now_ns: int) -> None:
        """Moves the TTL clock to now_ns without a request (no-op without TTL)."""
        lib.lh_hybrid_advance_time(self._handle(), now_ns)

    def reset(self) -> None:
        """Forgets every object (keeps the configuration)."""
        lib.lh_hybrid_reset(self._handle())

    def full_within_bytes(self, budget_bytes: int) -> int:
        """Alive Full blocks among the most recent objects whose bytes fit budget_bytes."""
        return int(lib.lh_hybrid_full_within_bytes(self._handle(), min(int(budget_bytes), U64_MAX)))

    def stats(self) -> HybridStats:
        raw = ffi.new("lh_hybrid_stats *")
        lib.lh_hybrid_get_stats(self._handle(), raw)
        return HybridStats(**{f: int(getattr(raw, f)) for f in HybridStats.__slots__})

    def check(self) -> None:
        """Verifies internal invariants (tests); raises CoreInvalidArgument on a violation."""
        err = new_error_buffer()
        raise_for_status(lib.lh_hybrid_check(self._handle(), err, lib.LH_ERR_LEN), err)


def _flat(points: Sequence[tuple[int, int]] | U64Array) -> tuple[Any, int]:
    arr = np.ascontiguousarray(np.asarray(points, dtype=np.uint64).reshape(-1, 2))
    return arr, len(arr)


def project_steps(points: Sequence[tuple[int, int]] | U64Array, capacity_bytes: int) -> int:
    """Hit blocks of a byte-step fact at a total capacity of capacity_bytes (the projector)."""
    arr, n = _flat(points)
    cap = min(max(int(capacity_bytes), 0), U64_MAX)
    return int(lib.lh_project_steps(ptr("uint64_t[]", arr) if n else ffi.NULL, n, cap))


def project_steps_infinite(points: Sequence[tuple[int, int]] | U64Array) -> int:
    """Hit blocks of a byte-step fact at infinite capacity."""
    arr, n = _flat(points)
    return int(lib.lh_project_steps_infinite(ptr("uint64_t[]", arr) if n else ffi.NULL, n))


def project_steps_batch(facts: HybridFacts, capacity_bytes: Sequence[int | None]) -> U64Array:
    """Hit blocks of every request of a batch's facts at many total byte capacities (None =
    infinite): a (requests, capacities) array."""
    if any(c is not None and c < 0 for c in capacity_bytes):
        raise ValueError("capacities must not be negative; use None for infinite")
    caps = np.array([0 if c is None else min(int(c), U64_MAX) for c in capacity_bytes], dtype=np.uint64)
    inf = np.array([c is None for c in capacity_bytes], dtype=np.uint8)
    n = len(facts)
    hits = np.zeros((n, len(caps)), dtype=np.uint64)
    if n and len(caps):
        points = np.ascontiguousarray(facts.points, dtype=np.uint64).reshape(-1)
        offsets = np.ascontiguousarray(facts.point_offsets, dtype=np.int64)
        lib.lh_project_steps_batch(
            ptr("uint64_t[]", points) if len(points) else ffi.NULL,
            ptr("int64_t[]", offsets),
            n,
            ptr("uint64_t[]", caps),
            ptr("uint8_t[]", inf),
            len(caps),
            ptr("uint64_t[]", hits),
        )
    return hits
