"""The hit-curve projector: the only code that turns a capacity into hit blocks (and the tier
split, lh_tiers.h, which projects each tier's cumulative capacity through it).

A curve is a sequence of (start_required_blocks, run_length) pairs. Byte capacities become
block capacities here, with a single floor division by block_bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core_c._arrays import ptr
from core_c._core import ffi, lib
from core_c.errors import new_error_buffer, raise_for_status

__all__ = [
    "Curve",
    "curve_add",
    "curve_points",
    "project_batch",
    "project_blocks",
    "project_bytes",
    "project_infinite",
    "project_tiers",
    "tiers_sums",
]

Curve = Sequence[tuple[int, int]] | npt.NDArray[np.int64]

_U64_MAX = 2**64 - 1
_SIZE_MAX = int(ffi.cast("size_t", -1))


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


def curve_add(diff: npt.NDArray[np.int64], segments: npt.NDArray[np.int64]) -> int:
    """Adds many curves' segments ((n, 2) int64: start >= 1, run >= 0) to the difference array diff
    (lh_project.h). Returns the length diff needs for them (0 for none): when that is above
    len(diff), nothing changed. ValueError (nothing changed) for a malformed segment."""
    segs = np.ascontiguousarray(segments, dtype=np.int64).reshape(-1)
    if diff.dtype != np.int64 or not diff.flags.c_contiguous or not diff.flags.writeable:
        raise ValueError("diff must be a writeable contiguous int64 array")
    if len(segs) == 0:
        return 0
    need = int(
        lib.lh_project_curve_add(
            ptr("int64_t[]", diff) if len(diff) else ffi.NULL, len(diff), ptr("int64_t[]", segs), len(segs) // 2
        )
    )
    if need == _SIZE_MAX:
        raise ValueError("hit curve segments need start >= 1 and run >= 0")
    return need


def curve_points(diff: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The breakpoints of the summed curve of diff (curve_add): the capacities where hit blocks
    rise, from capacity 0 (0 hits) on, and the hit blocks there."""
    diff = np.ascontiguousarray(diff, dtype=np.int64)
    if len(diff) == 0:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    caps, hits = np.empty(len(diff), np.int64), np.empty(len(diff), np.int64)  # only what is written is touched
    n = int(
        lib.lh_project_curve_points(ptr("int64_t[]", diff), len(diff), ptr("int64_t[]", caps), ptr("int64_t[]", hits))
    )
    return caps[:n].copy(), hits[:n].copy()


def project_tiers(
    segments: npt.NDArray[np.int64],
    seg_offsets: npt.NDArray[np.int64],
    block_size: npt.NDArray[np.int64],
    block_bytes: npt.NDArray[np.int64],
    tier_value: npt.NDArray[np.uint64],
    tier_kind: npt.NDArray[np.uint8],
    n_tiers: int,
    *,
    inclusive: bool,
) -> npt.NDArray[np.uint64]:
    """The tier split (lh_tiers.h): a (requests, configurations, tiers) array of the hit blocks
    tiers 1..i serve. Configuration c, tier i is tier_value/tier_kind[c * n_tiers + i] (a capacity
    slot: SLOT_BYTES, SLOT_INFINITE, SLOT_BLOCKS, SLOT_TOKENS of core_c.query). CoreError (EINVAL)
    for an unknown kind, too many tiers or inclusive capacities that decrease in a row."""
    n = len(seg_offsets) - 1
    values = np.ascontiguousarray(tier_value, dtype=np.uint64)
    kinds = np.ascontiguousarray(tier_kind, dtype=np.uint8)
    if n_tiers <= 0 or len(values) % n_tiers or len(kinds) != len(values):
        raise ValueError("tier_value and tier_kind need n_tiers values per configuration")
    n_cfg = len(values) // n_tiers
    served = np.zeros((n, n_cfg, n_tiers), dtype=np.uint64)
    if n == 0 or n_cfg == 0:
        return served
    segs = np.ascontiguousarray(segments, dtype=np.int64).reshape(-1)
    err = new_error_buffer()
    status = lib.lh_tiers_served(
        ptr("int64_t[]", segs) if len(segs) else ffi.NULL,
        ptr("int64_t[]", np.ascontiguousarray(seg_offsets, dtype=np.int64)),
        n,
        ptr("int64_t[]", np.ascontiguousarray(block_size, dtype=np.int64)),
        ptr("int64_t[]", np.ascontiguousarray(block_bytes, dtype=np.int64)),
        ptr("uint64_t[]", values),
        ptr("uint8_t[]", kinds),
        n_cfg,
        n_tiers,
        int(inclusive),
        ptr("uint64_t[]", served),
        err,
        lib.LH_ERR_LEN,
    )
    raise_for_status(status, err)
    return served


def tiers_sums(
    segments: npt.NDArray[np.int64],
    seg_offsets: npt.NDArray[np.int64],
    block_size: npt.NDArray[np.int64],
    block_bytes: npt.NDArray[np.int64],
    tier_value: npt.NDArray[np.uint64],
    tier_kind: npt.NDArray[np.uint8],
    n_tiers: int,
    *,
    inclusive: bool,
    category: npt.NDArray[np.int32] | None = None,
    n_categories: int = 1,
    per_request: bool = False,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64] | None]:
    """The tier split summed (lh_tiers_sums): hit blocks, hit tokens and bytes loaded, each
    (configurations, categories, tiers), of what each tier alone served; with per_request, also
    the (requests, configurations, tiers) blocks each tier alone served."""
    n = len(seg_offsets) - 1
    values = np.ascontiguousarray(tier_value, dtype=np.uint64)
    kinds = np.ascontiguousarray(tier_kind, dtype=np.uint8)
    if n_tiers <= 0 or len(values) % n_tiers or len(kinds) != len(values):
        raise ValueError("tier_value and tier_kind need n_tiers values per configuration")
    n_cfg = len(values) // n_tiers
    shape = (n_cfg, n_categories, n_tiers)
    blocks, tokens, loaded = (np.zeros(shape, dtype=np.uint64) for _ in range(3))
    tier_hits = np.zeros((n, n_cfg, n_tiers), dtype=np.uint64) if per_request else None
    if n == 0 or n_cfg == 0:
        return blocks, tokens, loaded, tier_hits
    segs = np.ascontiguousarray(segments, dtype=np.int64).reshape(-1)
    cats = None if category is None else np.ascontiguousarray(category, dtype=np.int32)
    err = new_error_buffer()
    status = lib.lh_tiers_sums(
        ptr("int64_t[]", segs) if len(segs) else ffi.NULL,
        ptr("int64_t[]", np.ascontiguousarray(seg_offsets, dtype=np.int64)),
        n,
        ptr("int64_t[]", np.ascontiguousarray(block_size, dtype=np.int64)),
        ptr("int64_t[]", np.ascontiguousarray(block_bytes, dtype=np.int64)),
        ffi.NULL if cats is None else ptr("int32_t[]", cats),
        n_categories,
        ptr("uint64_t[]", values),
        ptr("uint8_t[]", kinds),
        n_cfg,
        n_tiers,
        int(inclusive),
        ptr("uint64_t[]", blocks),
        ptr("uint64_t[]", tokens),
        ptr("uint64_t[]", loaded),
        ffi.NULL if tier_hits is None else ptr("uint64_t[]", tier_hits),
        err,
        lib.LH_ERR_LEN,
    )
    raise_for_status(status, err)
    return blocks, tokens, loaded, tier_hits
