"""Request preprocessing: the rolling prefix hash and NormalizeRequest (length contract,
missing-length derivation, prefix hash before re-blocking, coarsening by every k-th key)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, ptr
from core_c._core import ffi, lib
from core_c.errors import new_error_buffer, raise_for_status

__all__ = [
    "NormalizedBatch",
    "NormalizedRequest",
    "normalize",
    "normalize_batch",
    "prefix_hash",
    "prefix_hash_next",
]


def prefix_hash_next(prev: int, raw: int) -> int:
    """One step of the rolling prefix hash (uint64 arithmetic, logical shifts)."""
    return int(lib.lh_prefix_hash_next(_i64(prev), _i64(raw)))


def prefix_hash(raw: Iterable[int] | npt.NDArray[Any]) -> Int64Array:
    """Chains per-block raw hashes into prefix keys, starting from 0."""
    keys = as_int64(raw)
    out = np.empty_like(keys)
    lib.lh_prefix_hash_chain(ptr("int64_t[]", keys), len(keys), ptr("int64_t[]", out))
    return out


@dataclass(frozen=True, slots=True)
class NormalizedRequest:
    keys: Int64Array
    input_len: int


def normalize(
    keys: Iterable[int] | npt.NDArray[Any],
    input_len: int,
    block_size: int,
    *,
    trace_block_size: int = 0,
    prefix_hash: bool = False,
) -> NormalizedRequest:
    """NormalizeRequest of the original tool; raises CoreInvalidArgument with its message."""
    src = as_int64(keys)
    out = np.empty_like(src)
    out_n = ffi.new("size_t *")
    out_len = ffi.new("int64_t *")
    err = new_error_buffer()
    status = lib.lh_normalize(
        ptr("int64_t[]", src),
        len(src),
        input_len,
        block_size,
        trace_block_size,
        int(prefix_hash),
        ptr("int64_t[]", out),
        out_n,
        out_len,
        err,
        lib.LH_ERR_LEN,
    )
    raise_for_status(status, err)
    return NormalizedRequest(out[: out_n[0]].copy(), int(out_len[0]))


@dataclass(frozen=True, slots=True)
class NormalizedBatch:
    """Flat normalized requests: request i has keys[offsets[i]:offsets[i+1]] and input_lens[i]."""

    keys: Int64Array
    offsets: Int64Array
    input_lens: Int64Array

    def __len__(self) -> int:
        return len(self.input_lens)


def normalize_batch(
    keys: Int64Array,
    offsets: Int64Array,
    input_lens: Int64Array,
    block_size: int,
    *,
    rows: Int64Array | None = None,
    trace_block_size: int = 0,
    prefix_hash: bool = False,
) -> NormalizedBatch:
    """Normalizes many flat requests (optionally only ``rows``, in that order).

    On failure the CoreError carries ``index``: the failing request within the selection.
    """
    keys = as_int64(keys)
    offsets = as_int64(offsets)
    input_lens = as_int64(input_lens)
    n = len(input_lens) if rows is None else len(rows)
    if rows is None and len(offsets) != n + 1:
        raise ValueError("offsets must have one more entry than input_lens")
    sel = None if rows is None else as_int64(rows)
    if sel is not None and len(sel) and (sel.min() < 0 or sel.max() >= len(input_lens)):
        raise IndexError("rows out of range")
    if sel is None:
        capacity = int(offsets[-1] - offsets[0]) if n else 0
    else:
        capacity = int((offsets[sel + 1] - offsets[sel]).sum()) if n else 0
    out_keys = np.empty(capacity, dtype=np.int64)
    out_offsets = np.empty(n + 1, dtype=np.int64)
    out_lens = np.empty(n, dtype=np.int64)
    n_done = ffi.new("size_t *")
    err = new_error_buffer()
    status = lib.lh_normalize_batch(
        ptr("int64_t[]", keys),
        ptr("int64_t[]", offsets),
        ptr("int64_t[]", input_lens),
        ffi.NULL if sel is None else ptr("int64_t[]", sel),
        n,
        block_size,
        trace_block_size,
        int(prefix_hash),
        ptr("int64_t[]", out_keys),
        ptr("int64_t[]", out_offsets),
        ptr("int64_t[]", out_lens),
        n_done,
        err,
        lib.LH_ERR_LEN,
    )
    raise_for_status(status, err, index=int(n_done[0]))
    return NormalizedBatch(out_keys[: out_offsets[n]], out_offsets, out_lens)


def _i64(v: int) -> int:
    return int(as_int64([v])[0])
