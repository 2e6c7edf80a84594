"""One lane of the LiteHit core: an exact, capacity-independent LRU replay.

**Usage**::

    with Lane() as lane:                       # pure LRU
        lane.process([1, 2, 3])                # -> ()            (all cold)
        lane.process([1, 2, 3])                # -> ((1, 3),)     (one arithmetic segment)
    with Lane(ttl_ns=60 * 10**9) as lane:      # fixed TTL: alive iff age < ttl
        lane.process([1, 2], timestamp_ns=0)
    facts = lane.process_batch(keys, offsets, timestamps)   # many requests, flat arrays

A lane is not thread-safe: one thread (or process) owns it. Memory is released by ``close()``,
by leaving the ``with`` block, or at the latest when the object is garbage collected.
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
    "CUT_COLD",
    "CUT_EXPIRED",
    "CUT_NONE",
    "MAX_VIEWS",
    "BatchFacts",
    "HitCurve",
    "Lane",
    "LaneStats",
    "LaneViews",
]

HitCurve = tuple[tuple[int, int], ...]

CUT_NONE = int(lib.LH_CUT_NONE)
CUT_COLD = int(lib.LH_CUT_COLD)
CUT_EXPIRED = int(lib.LH_CUT_EXPIRED)
MAX_VIEWS = int(lib.LH_LANE_MAX_VIEWS)


@dataclass(frozen=True, slots=True)
class LaneStats:
    unique_blocks: int  # alive tracked blocks
    tracked_keys: int  # map entries incl. expired keys not yet reclaimed
    positions: int  # allocated positions (live + stale)
    map_slots: int
    epochs: int
    expired_blocks: int  # cumulative
    memory_bytes: int
    compactions: int
    requests: int
    accesses: int


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """Facts of a batch: request i's curve is segments[seg_offsets[i]:seg_offsets[i+1]]
    (rows of (start_required_blocks, run_length)); cuts[i] is a CUT_* code; key_ids (a lane
    with ``key_ids=True``, else None) each block's key number in order of first sight, indexed as
    the keys given (blocks not replayed hold 0)."""

    segments: npt.NDArray[np.int64]
    seg_offsets: Int64Array
    cuts: npt.NDArray[np.uint8]
    key_ids: npt.NDArray[np.uint32] | None = None

    def __len__(self) -> int:
        return len(self.cuts)

    def curve(self, i: int) -> HitCurve:
        rows = self.segments[self.seg_offsets[i] : self.seg_offsets[i + 1]]
        return tuple((int(s), int(r)) for s, r in rows)


class Lane(CHandle):
    """A LiteHit lane core. ``ttl_ns`` = 0 is pure LRU; ``keep_expired`` remembers expired
    keys so that a cut by an expired block is never reported as cold (costs memory);
    ``key_ids`` numbers the keys in order of first sight and returns each block's number with
    the facts (for a ProfileRecorder following the lane: it then needs no key map of its own;
    keeps expired keys too, and the key map takes 16 bytes a slot instead of 12)."""

    def __init__(self, ttl_ns: int = 0, *, keep_expired: bool = False, key_ids: bool = False) -> None:
        self.ttl_ns = int(ttl_ns)
        self.key_ids = bool(key_ids)
        out = ffi.new("lh_lane **")
        err = new_error_buffer()
        flags = (lib.LH_LANE_KEEP_EXPIRED if keep_expired else 0) | (lib.LH_LANE_KEY_IDS if key_ids else 0)
        raise_for_status(lib.lh_lane_create(out, self.ttl_ns, flags, err, lib.LH_ERR_LEN), err)
        self._own(out[0], lib.lh_lane_destroy)

    # -- processing -----------------------------------------------------------------------

    def process(self, keys: Iterable[int] | npt.NDArray[Any], timestamp_ns: int = 0) -> HitCurve:
        """Replays one request and returns its hit curve."""
        arr = as_int64(keys)
        facts = self.process_batch(
            arr, np.array([0, len(arr)], dtype=np.int64), np.array([timestamp_ns], dtype=np.int64)
        )
        return facts.curve(0)

    def process_batch(
        self,
        keys: Int64Array,
        offsets: Int64Array,
        timestamps: Int64Array | None = None,
    ) -> BatchFacts:
        """Replays requests keys[offsets[i]:offsets[i+1]] (timestamps[i]) in order.

        On failure raises CoreError with ``index`` = the failing request and ``partial`` = the
        facts of the requests before it (which are committed); the failing one changed nothing.
        """
        handle = self._handle()
        keys, offsets, ts, n, room = batch_args(keys, offsets, timestamps, timed=self.ttl_ns > 0)
        segments = np.empty((room, 2), dtype=np.int64)
        seg_offsets = np.zeros(n + 1, dtype=np.int64)
        cuts = np.zeros(n, dtype=np.uint8)
        # indexed as keys; np.empty, not zeros: the C core writes the number of every block it replays
        # (the others are zeroed below), and a fresh zeroed array per chunk cost the bench's profile
        # about 0.2 CPU s, most of it the kernel's (page faults)
        ids = np.empty(len(keys), dtype=np.uint32) if self.key_ids else None
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        status = lib.lh_lane_process_batch(
            handle,
            ptr("int64_t[]", keys),
            len(keys),
            ptr("int64_t[]", offsets),
            ffi.NULL if ts is None else ptr("int64_t[]", ts),
            n,
            ptr("int64_t[]", segments),
            ptr("int64_t[]", seg_offsets),
            ptr("uint8_t[]", cuts),
            ffi.NULL if ids is None else ptr("uint32_t[]", ids),
            n_done,
            err,
            lib.LH_ERR_LEN,
        )
        done = int(n_done[0])
        if ids is not None:  # blocks not replayed hold 0 (BatchFacts)
            ids[: offsets[0] if n else len(ids)] = 0
            if n:
                ids[offsets[done] :] = 0
        facts = BatchFacts(segments[: seg_offsets[done]], seg_offsets[: done + 1], cuts[:done], ids)
        raise_for_status(status, err, index=done, partial=facts)
        return facts

    def advance_time(self, now_ns: int) -> None:
        """Moves the TTL clock to now_ns without a request (no-op without TTL)."""
        lib.lh_lane_advance_time(self._handle(), now_ns)

    def reset(self) -> None:
        """Forgets every key, as if new (keeps the TTL)."""
        lib.lh_lane_reset(self._handle())

    # -- observability --------------------------------------------------------------------

    def stats(self) -> LaneStats:
        return _view_stats(self._handle(), 0)

    @property
    def unique_blocks(self) -> int:
        """Alive unique blocks tracked (expired ones excluded)."""
        return self.stats().unique_blocks

    @property
    def memory_bytes(self) -> int:
        """Bytes of C state currently allocated by this lane."""
        return self.stats().memory_bytes

    @property
    def expired_blocks(self) -> int:
        """Cumulative number of blocks that expired (a revived key counts again)."""
        return self.stats().expired_blocks

    def check(self) -> None:
        """Verifies internal invariants (tests); raises CoreInvalidArgument on a violation."""
        _check(self._handle())


class LaneViews(CHandle):
    """One lane replayed for several TTLs at once (``ttls_ns``, 0 = never expires; at most
    MAX_VIEWS): view v's facts are exactly those of ``Lane(ttls_ns[v])`` over the same requests,
    from one key map and one LRU order (expiry follows recency, so every TTL sees the same reuse
    distances and only cuts the prefix at its own first expired block). ``keep_expired`` as for
    Lane; with it, every view's cut reasons are exact."""

    def __init__(self, ttls_ns: Sequence[int], *, keep_expired: bool = False) -> None:
        self.ttls_ns = tuple(int(t) for t in ttls_ns)
        out = ffi.new("lh_lane **")
        err = new_error_buffer()
        ttls = np.array(self.ttls_ns, dtype=np.int64)
        flags = lib.LH_LANE_KEEP_EXPIRED if keep_expired else 0
        raise_for_status(
            lib.lh_lane_create_views(out, ptr("int64_t[]", ttls), len(ttls), flags, err, lib.LH_ERR_LEN), err
        )
        self._own(out[0], lib.lh_lane_destroy)

    def process_batch(
        self, keys: Int64Array, offsets: Int64Array, timestamps: Int64Array | None = None
    ) -> list[BatchFacts]:
        """Replays requests keys[offsets[i]:offsets[i+1]] (timestamps[i]) in order; the facts of
        each view, in view order. On failure raises CoreError as Lane.process_batch, its
        ``partial`` the list of each view's facts before the failing request."""
        handle = self._handle()
        keys, offsets, ts, n, room = batch_args(keys, offsets, timestamps, timed=any(t > 0 for t in self.ttls_ns))
        views = len(self.ttls_ns)
        segments = [np.empty((room, 2), dtype=np.int64) for _ in range(views)]
        seg_offsets = [np.zeros(n + 1, dtype=np.int64) for _ in range(views)]
        cuts = [np.zeros(n, dtype=np.uint8) for _ in range(views)]
        outs = ffi.new("lh_lane_view_out[]", views)
        for v in range(views):
            outs[v].segs = ptr("int64_t[]", segments[v])
            outs[v].seg_offsets = ptr("int64_t[]", seg_offsets[v])
            outs[v].cuts = ptr("uint8_t[]", cuts[v])
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        status = lib.lh_lane_process_views(
            handle,
            ptr("int64_t[]", keys),
            len(keys),
            ptr("int64_t[]", offsets),
            ffi.NULL if ts is None else ptr("int64_t[]", ts),
            n,
            outs,
            views,
            n_done,
            err,
            lib.LH_ERR_LEN,
        )
        done = int(n_done[0])
        facts = [
            BatchFacts(segs[: offs[done]], offs[: done + 1], cut[:done])
            for segs, offs, cut in zip(segments, seg_offsets, cuts, strict=True)
        ]
        raise_for_status(status, err, index=done, partial=facts)
        return facts

    def advance_time(self, now_ns: int) -> None:
        """Moves the TTL clock to now_ns without a request, in every view."""
        lib.lh_lane_advance_time(self._handle(), now_ns)

    def stats(self, view: int = 0) -> LaneStats:
        """What view `view` holds (unique_blocks, epochs, expired_blocks); the other fields,
        memory_bytes included, are the whole lane's, shared by its views."""
        if not 0 <= view < len(self.ttls_ns):
            raise IndexError(f"view {view} of a lane of {len(self.ttls_ns)} views")
        return _view_stats(self._handle(), view)

    def check(self) -> None:
        """Verifies internal invariants (tests); raises CoreInvalidArgument on a violation."""
        _check(self._handle())


def _view_stats(handle: Any, view: int) -> LaneStats:
    raw = ffi.new("lh_lane_stats *")
    lib.lh_lane_get_view_stats(handle, view, raw)
    return LaneStats(**{f: int(getattr(raw, f)) for f in LaneStats.__slots__})


def _check(handle: Any) -> None:
    err = new_error_buffer()
    raise_for_status(lib.lh_lane_check(handle, err, lib.LH_ERR_LEN), err)
