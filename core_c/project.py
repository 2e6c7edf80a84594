"""The hit-curve projector: the only code that turns a capacity into hit blocks.

A curve is a sequence of (start_required_blocks, run_length) pairs. Byte capacities become
block capacities here, with a single floor division by block_bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core_c._arrays import ptr
from core_c._core import ffi, lib

__all__ = ["Curve", "project_batch", "project_blocks", "project_bytes", "project_infinite"]

Curve = Sequence[tuple[int, int]] | npt.NDArray[np.int64]

_U64_MAX = 2**64 - 1


def _segments(curve: Curve) -> npt.NDArray[np.int64]:
    segs = np.ascontiguousarray(np.asarray(curve, dtype=np.int64).reshape(-1, 2))
    if len(segs) and (segs[:, 0].min() < 1 or segs[:, 1].min() < 0):
        raise ValueError("hit curve segments need start >= 1 and run >= 0")
    return segs


def project_blocks(curve: Curve, capacity_blocks: int) -> int:
    """Prefix hit blocks at a capacity of ``capacity_blocks`` blocks (>= 0)."""
    if capacity_blocks < 0:
        raise ValueError("capacity_blocks must not be negative; use project_infinite")
    segs = _segments(curve)
    capacity = min(capacity_blocks, _U64_MAX)
    return int(lib.lh_project_blocks(ptr("int64_t[]", segs), len(segs), capacity))


def project_bytes(curve: Curve, capacity_bytes: int, block_bytes: int) -> int:
    """Prefix hit blocks at ``capacity_bytes`` for blocks of ``block_bytes`` (> 0) bytes."""
    if block_bytes <= 0:
        raise ValueError("block_bytes must be positive")
    if capacity_bytes < 0:
        raise ValueError("capacity_bytes must not be negative; use project_infinite")
    if capacity_bytes > _U64_MAX or block_bytes > _U64_MAX:
        return project_blocks(curve, capacity_bytes // block_bytes)
    segs = _segments(curve)
    return int(lib.lh_project_bytes(ptr("int64_t[]", segs), len(segs), capacity_bytes, block_bytes))


def project_infinite(curve: Curve) -> int:
    """Prefix hit blocks at infinite capacity: only cold and expired misses remain."""
    segs = _segments(curve)
    return int(lib.lh_project_infinite(ptr("int64_t[]", segs), len(segs)))


def project_batch(
    segments: npt.NDArray[np.int64],
    seg_offsets: npt.NDArray[np.int64],
    capacity_blocks: Sequence[int | None],
) -> npt.NDArray[np.uint64]:
    """Hit blocks of many curves (BatchFacts layout) at many block capacities (None = infinite):
    a (requests, capacities) array."""
    n = len(seg_offsets) - 1
    caps = np.array([0 if c is None else min(c, _U64_MAX) for c in capacity_blocks], dtype=np.uint64)
    inf = np.array([c is None for c in capacity_blocks], dtype=np.uint8)
    if any(c is not None and c < 0 for c in capacity_blocks):
        raise ValueError("capacities must not be negative; use None for infinite")
    segs = np.ascontiguousarray(segments, dtype=np.int64).reshape(-1)
    offsets = np.ascontiguousarray(seg_offsets, dtype=np.int64)
    hits = np.zeros((n, len(caps)), dtype=np.uint64)
    if n and len(caps):
        lib.lh_project_batch(
            ptr("int64_t[]", segs) if len(segs) else ffi.NULL,
            ptr("int64_t[]", offsets),
            n,
            ptr("uint64_t[]", caps),
            ptr("uint8_t[]", inf),
            len(caps),
            ptr("uint64_t[]", hits),
        )
    return hits
