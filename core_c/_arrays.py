"""Conversions between Python/numpy values and the C core's flat int64 arrays."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._core import ffi

Int64Array = npt.NDArray[np.int64]


def as_int64(values: Iterable[int] | npt.NDArray[Any]) -> Int64Array:
    """A C-contiguous int64 array; integers above INT64_MAX wrap as two's complement."""
    if isinstance(values, np.ndarray):
        if values.dtype == np.uint64:
            return np.ascontiguousarray(values.view(np.int64))
        if values.dtype.kind not in "iu":
            raise TypeError(f"expected an integer array, got dtype {values.dtype}")
        return np.ascontiguousarray(values, dtype=np.int64)
    items = list(values)
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"block keys must be integers, got {v!r}")
    try:
        return np.array(items, dtype=np.int64)
    except OverflowError:
        return np.array([_wrap(int(v)) for v in items], dtype=np.int64)


def _wrap(v: int) -> int:
    if not -(2**63) <= v < 2**64:
        raise OverflowError(f"block key {v} does not fit in 64 bits")
    return v - 2**64 if v >= 2**63 else v


def ptr(kind: str, array: npt.NDArray[Any]) -> Any:
    """A cffi pointer into a contiguous numpy array (the array must outlive the call)."""
    return ffi.from_buffer(kind, array)


def copied(pointer: Any, count: int, dtype: Any) -> Any:
    """A numpy copy of count elements of dtype at a C pointer (which may be NULL when count is 0)."""
    if count == 0:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(ffi.buffer(pointer, count * np.dtype(dtype).itemsize), dtype=dtype).copy()


def batch_args(
    keys: Int64Array, offsets: Int64Array, timestamps: Int64Array | None, *, timed: bool
) -> tuple[Int64Array, Int64Array, Int64Array | None, int, int]:
    """A batch's arrays as the C core takes them, its request count and the curve room it needs."""
    keys = as_int64(keys)
    offsets = as_int64(offsets)
    n = len(offsets) - 1
    if n < 0:
        raise ValueError("offsets needs at least one entry")
    ts = None
    if timestamps is not None:
        ts = as_int64(timestamps)
        if len(ts) != n:
            raise ValueError("timestamps must have one entry per request")
    elif timed and n:
        raise ValueError("a TTL lane needs timestamps")
    room = len(keys) - int(offsets[0]) if n else 0  # the C core checks the offsets (lh_batch.h)
    return keys, offsets, ts, n, max(room, 0)
