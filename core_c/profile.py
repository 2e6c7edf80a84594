"""The workload-profile recorder (lh_profile.h): per key first/last access, one record per reuse,
hit blocks by threshold and the working set per time window, fed alongside a lane.

**Usage**::

    with Lane(ttl_ns) as lane, ProfileRecorder(window_ns=60 * 10**9) as rec:
        facts = lane.process_batch(keys, offsets, timestamps)
        hits = rec.record_batch(keys, offsets, timestamps, categories, facts)   # per request
        arrays = rec.arrays()      # numpy views of the recorder's state (see ProfileArrays)
        rec.reuses_of(category)    # one category's reuse times, in runs (and keys, see CategoryReuses)
    tally(values, max_distinct, weights=None)  # distinct values ascending, counts, exact sum (or None)

The recorder never sees a capacity: it keeps what a profile is computed from; litehit.profile
computes the metrics. Not thread-safe: one thread owns a recorder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, ptr
from core_c._core import ffi, lib
from core_c._handle import CHandle
from core_c.errors import new_error_buffer, raise_for_status
from core_c.lane import BatchFacts

__all__ = ["CategoryReuses", "ProfileArrays", "ProfileRecorder", "ProfileStats", "tally"]


@dataclass(frozen=True, slots=True)
class ProfileStats:
    requests: int
    accesses: int
    keys: int
    reuses: int
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class ProfileArrays:
    """Views of a recorder's state; valid until it records, resets or closes.

    Key i is the i-th distinct key in order of first access, request j the j-th recorded request
    that had blocks: ``first_req``/``last_req`` the key's first and latest access (a request
    containing it), ``reuses`` its reuses (every category), ``request_ns``/``request_cat`` each
    request's timestamp and category. The properties ``first_ns``, ``last_ns``, ``first_cat``
    and ``shared`` (1 when two or more requests contained the key) are made from those (new
    arrays per key on each use). ``threshold_slope``: +1 at every curve segment's start, -1
    past its end (its prefix sums are the hit blocks whose threshold is exactly t; sum those
    again for the hit blocks at capacity C). ``window``/``window_keys``: every time window that
    saw a request (ascending) and the distinct keys accessed in it. ``base_category``: the first
    category that reused (-1: none); ``base_reuses``: the keys' reuse counts when a second
    category first reused (empty while one category reuses). ``categories``: the ids that may
    have reuses (see ``reuses_of``)."""

    first_req: npt.NDArray[np.uint32]
    last_req: npt.NDArray[np.uint32]
    reuses: npt.NDArray[np.uint32]
    request_ns: Int64Array
    request_cat: npt.NDArray[np.int32]
    threshold_slope: Int64Array
    window: Int64Array
    window_keys: Int64Array
    categories: int
    base_category: int
    base_reuses: npt.NDArray[np.uint32]

    @property
    def first_ns(self) -> Int64Array:
        return self.request_ns[self.first_req]

    @property
    def last_ns(self) -> Int64Array:
        return self.request_ns[self.last_req]

    @property
    def first_cat(self) -> npt.NDArray[np.int32]:
        return self.request_cat[self.first_req]

    @property
    def shared(self) -> npt.NDArray[np.uint8]:
        shared: npt.NDArray[np.uint8] = (self.first_req != self.last_req).astype(np.uint8)
        return shared

    def lifespans(self, where: npt.NDArray[np.bool_] | None = None) -> tuple[Int64Array, int]:
        """The lifespans (latest access - first) of every key, or of the keys where ``where``
        holds, and how many of those keys only one request contained."""
        first, last = (
            (self.first_req, self.last_req) if where is None else (self.first_req[where], self.last_req[where])
        )
        spans = self.request_ns[last]
        spans -= self.request_ns[first]
        return spans, int(np.count_nonzero(first == last))


@dataclass(frozen=True, slots=True)
class CategoryReuses:
    """The reuses of one category, in order, as runs of equal reuse times: ``runs[i]`` reuses of
    ``ns[i]`` ns, the time since the key's latest access by an earlier request (consecutive runs
    share a time only where a run reached 2^32 - 1); ``n`` the reuses in all; ``keys`` the key
    of each of the last len(keys) reuses (those since a second category first reused; empty
    before). Read-only views of the recorder's arrays."""

    n: int
    ns: Int64Array
    runs: npt.NDArray[np.uint32]
    keys: npt.NDArray[np.uint32]

    def expanded(self) -> Int64Array:
        """Every reuse time, in order (n values: a copy as large as the reuses)."""
        return np.repeat(self.ns, self.runs)


def _view(pointer: Any, n: int, dtype: type[np.generic], *, writable: bool = False) -> npt.NDArray[Any]:
    if n == 0:
        return np.empty(0, dtype=dtype)
    array = np.frombuffer(ffi.buffer(pointer, n * np.dtype(dtype).itemsize), dtype=dtype)
    array.flags.writeable = writable
    return array


class ProfileRecorder(CHandle):
    """Follows one lane; working-set windows are ``window_ns`` long (aligned at 0)."""

    def __init__(self, window_ns: int = 60 * 10**9) -> None:
        out = ffi.new("lh_profile **")
        err = new_error_buffer()
        raise_for_status(lib.lh_profile_create(out, int(window_ns), err, lib.LH_ERR_LEN), err)
        self.window_ns = int(window_ns)
        self._own(out[0], lib.lh_profile_destroy)

    def record_batch(
        self,
        keys: Int64Array,
        offsets: Int64Array,
        timestamps: Int64Array,
        categories: npt.NDArray[np.int32],
        facts: BatchFacts,
    ) -> Int64Array:
        """Records requests the lane has just processed (the same arrays it was given, and the
        facts it returned); returns each request's infinite-capacity hit blocks. Facts carrying
        key numbers (a ``Lane(key_ids=True)``) are recorded by those numbers, without the
        recorder's own key map: feed such a recorder one lane's facts only, from its first batch
        (it takes numbers or keys for good).

        On failure raises CoreError with ``index`` = the failing request and ``partial`` = the
        hits of the requests before it (which are recorded); the failing one changed nothing."""
        handle = self._handle()
        keys, offsets, ts = as_int64(keys), as_int64(offsets), as_int64(timestamps)
        n = len(offsets) - 1
        if n < 0:
            raise ValueError("offsets needs at least one entry")
        if n and (offsets[0] < 0 or offsets[-1] > len(keys) or bool(np.any(offsets[1:] < offsets[:-1]))):
            raise ValueError("offsets must be non-decreasing and within keys")
        given = np.asarray(categories)
        if given.size and given.dtype != np.int32 and (given.min() < -(2**31) or given.max() >= 2**31):
            raise ValueError("categories must fit in int32")
        cats = np.ascontiguousarray(given, dtype=np.int32)
        if len(ts) != n or len(cats) != n or len(facts.seg_offsets) != n + 1:
            raise ValueError("timestamps, categories and facts need one entry per request")
        segs = np.ascontiguousarray(facts.segments, dtype=np.int64).reshape(-1, 2)
        seg_offsets = as_int64(facts.seg_offsets)
        if n and (seg_offsets[0] < 0 or seg_offsets[-1] > len(segs) or bool(np.any(np.diff(seg_offsets) < 0))):
            raise ValueError("facts segment offsets must be non-decreasing and within the segments")
        hits = np.zeros(n, dtype=np.int64)
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        ids = facts.key_ids
        if ids is not None and (ids.dtype != np.uint32 or len(ids) != len(keys)):
            raise ValueError("facts key_ids need one uint32 per key")
        if ids is not None:
            ids = np.ascontiguousarray(ids)
        status = lib.lh_profile_record_batch(
            handle,
            ptr("int64_t[]", keys),
            ffi.NULL if ids is None else ptr("uint32_t[]", ids),
            len(keys),
            ptr("int64_t[]", offsets),
            ptr("int64_t[]", ts),
            ptr("int32_t[]", cats),
            n,
            ptr("int64_t[]", segs),
            len(segs),
            ptr("int64_t[]", seg_offsets),
            ptr("int64_t[]", hits),
            n_done,
            err,
            lib.LH_ERR_LEN,
        )
        done = int(n_done[0])
        raise_for_status(status, err, index=done, partial=hits[:done])
        return hits

    def arrays(self) -> ProfileArrays:
        v = ffi.new("lh_profile_view *")
        lib.lh_profile_get_view(self._handle(), v)
        keys = int(v.n_keys)
        requests = int(v.n_requests)
        return ProfileArrays(
            first_req=_view(v.first_req, keys, np.uint32),
            last_req=_view(v.last_req, keys, np.uint32),
            reuses=_view(v.reuses, keys, np.uint32),
            request_ns=_view(v.request_ns, requests, np.int64),
            request_cat=_view(v.request_cat, requests, np.int32),
            threshold_slope=_view(v.threshold_slope, int(v.n_thresholds), np.int64),
            window=_view(v.window, int(v.n_windows), np.int64),
            window_keys=_view(v.window_keys, int(v.n_windows), np.int64),
            categories=int(v.n_categories),
            base_category=int(v.base_category),
            base_reuses=_view(v.base_reuses, int(v.n_base), np.uint32),
        )

    def reuses_of(self, category: int) -> CategoryReuses:
        """The reuses of a category (empty when it has none)."""
        r = ffi.new("lh_profile_reuses *")
        lib.lh_profile_get_reuses(self._handle(), int(category), r)
        runs = int(r.n_runs)
        return CategoryReuses(
            n=int(r.n),
            ns=_view(r.ns, runs, np.int64),
            runs=_view(r.runs, runs, np.uint32),
            keys=_view(r.keys, int(r.n_keys), np.uint32),
        )

    def reset(self) -> None:
        """Forgets everything recorded (keeps the window length)."""
        lib.lh_profile_reset(self._handle())

    def stats(self) -> ProfileStats:
        raw = ffi.new("lh_profile_stats *")
        lib.lh_profile_get_stats(self._handle(), raw)
        return ProfileStats(**{f: int(getattr(raw, f)) for f in ProfileStats.__slots__})


def tally(
    values: Int64Array, max_distinct: int, weights: npt.NDArray[np.uint32] | None = None
) -> tuple[Int64Array, Int64Array, int] | None:
    """The distinct values of an int64 array in ascending order, how often each occurs and the
    exact sum of all the values (a Python int: no wrap-around), from one pass through a hash map
    (lh_tally_i64): np.unique(values, return_counts=True) without sorting every value. weights:
    values[i] counts weights[i] times (runs of equal values, as CategoryReuses keeps them). None
    when there are more than ``max_distinct`` distinct values (sort instead: the map would be as
    large as the array)."""
    v = as_int64(values)
    w = ffi.NULL
    if weights is not None:
        given = np.asarray(weights)
        if len(given) != len(v):
            raise ValueError("weights need one entry per value")
        if given.size and (given.dtype.kind not in "iu" or given.min() < 1 or given.max() > 2**32 - 1):
            raise ValueError("weights must be integers from 1 to 2^32 - 1")
        weights = np.ascontiguousarray(given, dtype=np.uint32)
        w = ptr("uint32_t[]", weights)
    room = max(0, min(int(max_distinct), len(v)))
    out_values = np.empty(room, dtype=np.int64)
    out_counts = np.empty(room, dtype=np.int64)
    found = ffi.new("size_t *")
    high, low = ffi.new("int64_t *"), ffi.new("uint64_t *")
    err = new_error_buffer()
    status = lib.lh_tally_i64(
        ptr("int64_t[]", v), w, len(v), room, ptr("int64_t[]", out_values), ptr("int64_t[]", out_counts), found, high,
        low, err, lib.LH_ERR_LEN,
    )  # fmt: skip
    if status == lib.LH_ERANGE:
        return None
    raise_for_status(status, err)
    k = int(found[0])
    return out_values[:k], out_counts[:k], (int(high[0]) << 64) + int(low[0])
