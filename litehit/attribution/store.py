"""The attribution store: per worker, the evidence of its KV events, and the answer to "why did
this lookup miss?" (seed 003). The owner process holds one store for its shard.

The contract (README "Live miss attribution" has the user's version):

- Time. ``clock`` is the owner's monotonic clock (expiry never follows wall-clock corrections),
  ``wall`` its wall clock (only for consumer lag). Bucket b(t) = floor((t - t0) / bucket_s);
  with n = ceil(window_s / bucket_s) the store retains the removals of buckets b(now) - n ..
  b(now): at least ``window_s``, at most ``window_s + bucket_s``. Older removals expire into the
  worker's aged filter (a Bloom filter: it may claim a digest it never saw, never the opposite).
  Expiry happens on every apply and lookup, and on a timer (:meth:`AttributionStore.expire`, the
  owner's housekeeping), so memory follows the window on an idle owner too.
- Batches (``apply``). Per worker, within one epoch, seq grows by 1 per batch. A new epoch (one the
  worker never had) is a restart: everything known of the old epoch goes into the aged filter and
  the worker starts empty; a batch of one of its last 64 earlier epochs is ignored ("stale_epoch"),
  an older one counts as a new epoch again. A seq at or below the last is ignored ("duplicate").
  A seq beyond the next one may be a batch that overtook another (HTTP): it is held
  ("held") for up to ``reorder_grace_s`` and applied in seq order once the missing ones arrive;
  one still held after the grace is applied as a gap (the missing batches are lost evidence), and
  so is a jump of a source that never reorders (``may_reorder=False``: the ZMQ subscriber) or of
  any source with no grace. Applied batches are numbered 1, 2, ... per worker (a batch with
  ``cleared`` events takes one number per part, so a clear has a number of its own); lag =
  wall() - the ts of the latest applied batch.
- KV-cache groups. Evidence is kept per (group, digest): a removal in one group never explains a
  miss in another; ``cleared`` clears every group. An event without a group is of group 0. A
  lookup names its group or asks about the worker's full-attention group: the one group whose
  stored events declared a full-attention kind, or group 0 while the worker's events never named
  another group nor declared group 0's kind as something else; otherwise it is ``unknown``.
- Lookups, checked in this order: the block lies at or beyond the engine's lookup limit ->
  not_a_miss (the engine did not probe it); unknown worker -> unknown; its event source
  disconnected (the ZMQ subscriber says so; until its next batch) -> unknown; batches held for
  reordering (the missing one may change anything) -> unknown; lag above ``max_lag_s`` ->
  unknown; the group cannot be established -> unknown; resident -> resident (unknown when a gap
  came after its store); removal evidence in the window -> evicted with the removing batch's ts,
  cause "reset" when a ``cleared`` removed it (unknown when a gap came after it); absent ->
  unknown when the epoch began within the window, a gap lies within the window, the worker's
  resident set is not complete (its stream was not seen from the epoch's seq 0, or a gap came,
  and no `cleared` since: a block stored then may be resident), or the aged filter holds the
  digest; otherwise no_recent_match.
- The aged filter has two generations of ``filter_bits`` bits; a generation takes
  ``filter_generation`` digests (default: about 1 % false positives when full), then becomes the
  previous one and the one before is forgotten. So it never saturates, and an eviction older than
  the window is remembered for at least one generation's worth of later evictions.

Nothing is shared between workers. Thread-safe: one lock guards the store (the ZMQ subscribers
deliver from their threads, HTTP requests from the event loop, the expiry timer from another).
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core_c.evidence import AGED, MAX_BATCH, REMOVED, RESIDENT, EvidenceSet
from litehit.attribution.answers import OUTCOME_OF, Attribution, Cause, Lookup, Outcome, not_probed
from litehit.attribution.events import (
    FULL_ATTENTION_KINDS,
    BlockEvent,
    EventBatch,
    EventType,
    block_digest,
)

__all__ = [
    "OUTCOME_OF",
    "ApplyResult",
    "Attribution",
    "AttributionStore",
    "Cause",
    "Lookup",
    "Outcome",
    "group_keys",
    "not_probed",
]

_GROUP_SALT = 0x9E3779B97F4A7C15


def group_keys(digests: np.ndarray[Any, Any], group: int | None) -> np.ndarray[Any, Any]:
    """The store's keys of ``digests`` (int64) in KV-cache ``group``: the digests themselves in
    group 0 (or None), else a 64-bit mix of digest and group (a bijection of the digest for each
    group, so two hashes of one group never share a key, and a key of one group equals one of
    another with probability about 2**-64)."""
    if not group:
        return digests
    x = digests.view(np.uint64) ^ np.uint64((group * _GROUP_SALT) & ((1 << 64) - 1))
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    out: np.ndarray[Any, Any] = x.view(np.int64)
    return out


_KIND = {EventType.STORED: 0, EventType.REMOVED: 1, EventType.CLEARED: 2}
_PAST_EPOCHS = 64  # earlier epochs of a worker remembered to recognise their late batches
_COVERAGE_INTERVALS = 32  # intervals of applied seqs kept per worker (for /v1/attribution/workers)
MAX_HELD = 1024
"""Batches held for reordering per worker at most; beyond, the earliest is applied as a gap."""
EXPIRY_CHUNK = 65536
"""Slots of a worker's eviction table the timer's expiry sweeps per hold of the store's lock."""
GENERATION_LOAD = 0.0809
"""Digests per bit of an aged-filter generation: with three probes, a full generation answers
about 1 % of never-seen digests positive ((1 - exp(-3 * 0.0809)) ** 3 = 0.0100)."""


class ApplyResult(enum.StrEnum):
    APPLIED = "applied"
    GAP = "gap"  # applied after a seq jump: the missing batches are a gap in the evidence
    NEW_EPOCH = "new_epoch"  # applied as the first batch of a new epoch (a restart)
    HELD = "held"  # ahead of a missing seq: held for the reorder grace, applied in seq order
    DUPLICATE = "duplicate"  # seq at or below the last applied one (or already held): ignored
    STALE_EPOCH = "stale_epoch"  # a batch of an earlier epoch: ignored


@dataclass(slots=True)
class _Worker:
    evidence: EvidenceSet
    epoch: str
    epoch_since: float
    next_seq: int
    past_epochs: deque[str] = field(default_factory=lambda: deque(maxlen=_PAST_EPOCHS))
    batch: int = 0  # the latest applied batch number of this epoch
    batch_ts: dict[int, float] = field(default_factory=dict)  # the ts of every retained batch
    batch_buckets: deque[tuple[int, int]] = field(default_factory=deque)  # (bucket, batch), in order
    clear_batches: set[int] = field(default_factory=set)  # retained batch numbers that were a `cleared`
    held: dict[int, tuple[EventBatch, float]] = field(default_factory=dict)  # seq -> (batch, arrival)
    groups_seen: set[int] = field(default_factory=set)  # KV-cache groups named by this epoch's events
    group_kinds: dict[int, str] = field(default_factory=dict)  # group -> kind, from stored events
    last_gap_at: float | None = None
    last_gap_batch: int = 0
    lag_s: float = 0.0
    complete: bool = False  # every event since the epoch began (or since a clear) was applied
    disconnected: bool = False  # its event source lost the connection; cleared by the next batch
    last_batch_at: float = 0.0  # monotonic time of its latest batch (of any kind)
    coverage: deque[list[float]] = field(default_factory=lambda: deque(maxlen=_COVERAGE_INTERVALS))
    """The seqs applied in this epoch as intervals [first_seq, last_seq, since, until] (monotonic
    times of their first and last batch): a gap starts a new interval; the latest ones are kept."""
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


class AttributionStore:
    def __init__(
        self,
        *,
        window_s: float,
        bucket_s: float,
        max_lag_s: float,
        filter_bits: int,
        filter_generation: int | None = None,
        reorder_grace_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s}")
        if not (math.isfinite(bucket_s) and bucket_s > 0):
            raise ValueError(f"bucket_s must be a positive number of seconds, got {bucket_s}")
        if not max_lag_s >= 0:
            raise ValueError(f"max_lag_s must be >= 0, got {max_lag_s}")
        if not (math.isfinite(reorder_grace_s) and reorder_grace_s >= 0):
            raise ValueError(f"reorder_grace_s must be a number of seconds >= 0, got {reorder_grace_s}")
        if filter_bits != 0 and (filter_bits < 64 or filter_bits & (filter_bits - 1)):
            raise ValueError(f"filter_bits must be 0 or a power of two >= 64, got {filter_bits}")
        self.window_s, self.bucket_s, self.max_lag_s = window_s, bucket_s, max_lag_s
        self.reorder_grace_s = reorder_grace_s
        self.buckets = math.ceil(window_s / bucket_s)
        self.filter_log2 = filter_bits.bit_length() - 1 if filter_bits else 0
        if filter_generation is None:  # about 1 % false positives per full generation
            filter_generation = max(1, int(filter_bits * GENERATION_LOAD)) if filter_bits else 0
        if filter_generation < 0:
            raise ValueError(f"filter_generation must be >= 0, got {filter_generation}")
        self.filter_generation = filter_generation
        self.clock, self.wall = clock, wall
        self.t0 = clock()
        self.workers: dict[str, _Worker] = {}
        self.unknown_worker_lookups = 0  # lookups of workers with no events (answered unknown or not_a_miss)
        self.lock = threading.Lock()

    def bucket_of(self, t: float) -> int:
        return max(0, math.floor((t - self.t0) / self.bucket_s))

    # Events

    def apply(self, worker: str, batch: EventBatch, *, may_reorder: bool = True) -> ApplyResult:
        """Applies (or holds) one batch of a worker's events (see the module docstring).
        ``may_reorder=False``: the source delivers in seq order, so a jump is a gap at once."""
        if batch.seq < 0:
            raise ValueError(f"seq must be >= 0, got {batch.seq}")
        if not math.isfinite(batch.ts):
            raise ValueError(f"ts must be a finite number of seconds, got {batch.ts}")
        parts = _parts(batch.events)  # validates before anything changes
        with self.lock:
            now = self.clock()
            w = self.workers.get(worker)
            if w is not None:
                w.last_batch_at = now
            if w is None or batch.epoch != w.epoch:
                if w is not None and batch.epoch in w.past_epochs:
                    w.count("stale_epoch_batches")
                    return ApplyResult.STALE_EPOCH
                if w is not None:  # what the old epoch still held goes in first (it is old evidence)
                    self._release_held(w, now, force=True)
                w = self._new_epoch(worker, w, batch, now)
                self._apply_now(w, batch, parts, now)
                return ApplyResult.NEW_EPOCH
            if batch.seq < w.next_seq or batch.seq in w.held:
                w.count("duplicate_batches")
                return ApplyResult.DUPLICATE
            if batch.seq > w.next_seq and may_reorder and self.reorder_grace_s > 0:
                w.held[batch.seq] = (batch, now)
                w.count("held_batches")
                while len(w.held) > MAX_HELD:
                    self._release_held(w, now, force=True, one=True)
                self._release_held(w, now)  # the grace may be over for earlier ones
                return ApplyResult.HELD
            result = self._apply_now(w, batch, parts, now)
            self._release_held(w, now)  # what this batch was missing for
            return result

    def _release_held(self, w: _Worker, now: float, *, force: bool = False, one: bool = False) -> None:
        """Applies the held batches that can go, in seq order: one that is next, and the first one
        as a gap once the missing seq before it has been waited for during the whole grace (since
        the earliest arrival of a held batch, each of which shows it missing). ``force``: the
        grace is not waited for; ``one``: at most one gap."""
        gaps = 0
        while w.held:
            seq = min(w.held)
            if seq != w.next_seq:
                waited = now - min(arrived for _, arrived in w.held.values())
                if (not force and waited < self.reorder_grace_s) or (one and gaps):
                    return
                gaps += 1
            batch, _ = w.held.pop(seq)
            self._apply_now(w, batch, _parts(batch.events), now)

    def forget_idle(self, idle_s: float) -> list[str]:
        """Forgets the workers whose latest batch is more than ``idle_s`` old (a replica that went
        away): their evidence and memory go, and their lookups answer unknown (no events) again.
        Returns their names."""
        with self.lock:
            now = self.clock()
            gone = sorted(name for name, w in self.workers.items() if now - w.last_batch_at > idle_s)
            for name in gone:
                self.workers.pop(name).evidence.close()
            return gone

    def mark_disconnected(self, worker: str) -> None:
        """The worker's event source lost its connection: events may be missing until its next
        batch arrives, so its lookups answer unknown until then."""
        with self.lock:
            w = self.workers.get(worker)
            if w is not None:
                w.disconnected = True
                w.count("disconnects")

    def expire(self, *, chunk: int = EXPIRY_CHUNK) -> None:
        """The timer's expiry (the owner's housekeeping, off the serving thread): for every worker,
        the held batches whose grace is over are applied, the evidence older than the window goes
        into the aged filter and its memory is given back (a table left at most a quarter full
        shrinks), as if a lookup had come. The lock is taken per ``chunk`` slots swept, so
        lookups and events are not held up for a whole table."""
        with self.lock:
            names = list(self.workers)
        for name in names:
            with self.lock:
                w = self.workers.get(name)
                if w is None:
                    continue
                now = self.clock()
                self._release_held(w, now)
                self._advance(w, now)
            while True:
                with self.lock:
                    w = self.workers.get(name)
                    if w is None or w.evidence.sweep(chunk) == 0:
                        break
            with self.lock:
                w = self.workers.get(name)
                if w is not None:
                    w.evidence.trim()

    def _new_epoch(self, worker: str, w: _Worker | None, batch: EventBatch, now: float) -> _Worker:
        if w is None:
            evidence = EvidenceSet(self.buckets + 1, self.filter_log2, self.filter_generation)
            w = _Worker(evidence, batch.epoch, now, batch.seq, complete=batch.seq == 0, last_batch_at=now)
            self.workers[worker] = w
        else:
            w.past_epochs.append(w.epoch)
            w.coverage.clear()
            w.epoch = batch.epoch
            w.next_seq = batch.seq
            self._restart_history(w, now)
            w.complete = batch.seq == 0  # joined at the epoch's first batch: nothing was missed
            w.last_gap_at, w.last_gap_batch = None, 0
            w.groups_seen.clear()
            w.group_kinds.clear()
            w.count("restarts")
        return w

    def _restart_history(self, w: _Worker, now: float) -> None:
        """What the worker knew becomes aged evidence; its history starts now."""
        w.evidence.forget()
        w.complete = False  # what was resident is forgotten
        w.batch = 0
        w.batch_ts.clear()
        w.batch_buckets.clear()
        w.clear_batches.clear()
        w.epoch_since = now
        w.last_gap_batch = 0

    def _apply_now(self, w: _Worker, batch: EventBatch, parts: list[_Part], now: float) -> ApplyResult:
        """Applies a batch of the worker's current epoch whose seq is at least the next one."""
        self._advance(w, now)
        result = ApplyResult.APPLIED
        if batch.seq > w.next_seq:
            w.count("gaps")
            w.count("missing_batches", batch.seq - w.next_seq)
            w.last_gap_at, w.last_gap_batch = now, w.batch + 1
            w.complete = False
            result = ApplyResult.GAP
        bucket = self.bucket_of(now)
        for part in parts:
            if w.batch >= MAX_BATCH:  # ~4e9 batches in one epoch: start the numbering again, conservatively
                self._restart_history(w, now)
            w.batch += 1
            w.evidence.apply(w.batch, part.kinds, part.offsets, part.digests)
            if part.clear:
                w.clear_batches.add(w.batch)
            w.batch_ts[w.batch] = batch.ts
            w.batch_buckets.append((bucket, w.batch))
        if result is ApplyResult.APPLIED and w.coverage:
            w.coverage[-1][1], w.coverage[-1][3] = batch.seq, now
        else:  # the first batch of an epoch, or the first after a gap
            w.coverage.append([batch.seq, batch.seq, now, now])
        if any(part.clear for part in parts):
            w.complete = True  # nothing is resident but what this batch stored after the clear
        for event in batch.events:
            if event.type is not EventType.CLEARED:
                group = event.group or 0
                w.groups_seen.add(group)
                if event.type is EventType.STORED and event.group_kind:
                    w.group_kinds[group] = event.group_kind
        w.next_seq = batch.seq + 1
        w.disconnected = False
        w.lag_s = max(0.0, self.wall() - batch.ts)
        w.count("batches")
        for event in batch.events:
            w.count(f"{event.type.value}_events")
            w.count(f"{event.type.value}_blocks", len(event.block_hashes))
        return result

    def _advance(self, w: _Worker, now: float) -> None:
        bucket = self.bucket_of(now)
        w.evidence.advance(bucket)
        oldest = bucket - self.buckets
        while w.batch_buckets and w.batch_buckets[0][0] < oldest:
            number = w.batch_buckets.popleft()[1]
            del w.batch_ts[number]
            w.clear_batches.discard(number)

    # Lookups

    def lookup(self, worker: str, block_hash: int | bytes, group: int | None = None) -> Attribution:
        return self.lookup_many([Lookup(worker, block_hash, group)])[0]

    def lookup_many(self, items: Iterable[Lookup | tuple[str, int | bytes]]) -> list[Attribution]:
        """Answers each lookup (a :class:`Lookup`, or a (worker, first uncached block hash) pair),
        in order."""
        pending = [q if isinstance(q, Lookup) else Lookup(*q) for q in items]
        digests = [block_digest(q.block_hash) for q in pending]
        with self.lock:
            now = self.clock()
            by_worker: dict[str, list[int]] = {}
            for i, q in enumerate(pending):
                by_worker.setdefault(q.worker, []).append(i)
            answers: list[Attribution | None] = [None] * len(pending)
            for worker, positions in by_worker.items():
                w = self.workers.get(worker)
                if w is not None:
                    self._release_held(w, now)
                    self._advance(w, now)
                asked: dict[int, list[int]] = {}  # group -> positions to look up in the evidence
                for i in positions:
                    q = pending[i]
                    answer = not_probed(q)
                    if answer is None and w is None:
                        answer = Attribution.of(Cause.NO_EVENTS, f"no events from worker {worker!r}", group=q.group)
                    if answer is None:
                        assert w is not None
                        answer = self._stream_answer(w, q.group)
                    if answer is not None:
                        answers[i] = answer
                        continue
                    assert w is not None
                    group, problem = self._group_of(w, q.group)
                    if problem is not None:
                        answers[i] = Attribution.of(Cause.GROUP_UNKNOWN, problem)
                    else:
                        asked.setdefault(group, []).append(i)
                if w is not None:
                    for group, where in asked.items():
                        keys = group_keys(np.array([digests[i] for i in where], dtype=np.int64), group)
                        kinds, batches = w.evidence.lookup(keys)
                        for i, kind, batch in zip(where, kinds.tolist(), batches.tolist(), strict=True):
                            answers[i] = self._answer(w, now, kind, batch, group)
                for i in positions:
                    a = answers[i]
                    assert a is not None
                    if w is None:
                        self.unknown_worker_lookups += 1
                    else:
                        w.count(f"lookups_{a.outcome.value}")
                        w.count(f"cause_{a.cause.value}")
            return [a for a in answers if a is not None]

    def _stream_answer(self, w: _Worker, group: int | None) -> Attribution | None:
        """The answer that holds for any block of the worker now, if its stream says so."""
        if w.disconnected:
            return Attribution.of(
                Cause.DISCONNECTED, "the worker's event stream is disconnected: events may be missing", group=group
            )
        if w.held:
            return Attribution.of(
                Cause.PENDING,
                f"batch {w.next_seq} of the worker's events has not arrived; {len(w.held)} later batch(es) wait for "
                f"it (up to {self.reorder_grace_s:g} s): the evidence is pending",
                group=group,
            )
        if w.lag_s > self.max_lag_s:
            return Attribution.of(
                Cause.LAG, f"consumer lag {w.lag_s:.3f} s is above max_lag_s {self.max_lag_s:g} s", group=group
            )
        return None

    @staticmethod
    def _group_of(w: _Worker, requested: int | None) -> tuple[int, str | None]:
        """The KV-cache group a lookup is about, or why it cannot be established."""
        if requested is not None:
            return requested, None
        full = sorted(g for g, kind in w.group_kinds.items() if kind in FULL_ATTENTION_KINDS)
        if len(full) == 1:
            return full[0], None
        if len(full) > 1:
            return 0, f"the worker has several full-attention KV-cache groups {full}: the lookup must name its group"
        if w.groups_seen <= {0} and 0 not in w.group_kinds:
            return 0, None  # one group, of no declared kind: the engine names no groups
        named = sorted(w.groups_seen | set(w.group_kinds))
        return 0, (
            f"the worker's events name KV-cache groups {named} and declare none as full attention: the lookup must "
            "name its group"
        )

    def _answer(self, w: _Worker, now: float, kind: int, batch: int, group: int) -> Attribution:
        group_kind = w.group_kinds.get(group)

        def of(cause: Cause, reason: str, evicted_at: float | None = None) -> Attribution:
            return Attribution.of(cause, reason, evicted_at=evicted_at, group=group, group_kind=group_kind)

        if kind == RESIDENT:
            if w.last_gap_batch > batch:
                return of(Cause.GAP, "resident, but events were missed after it was stored")
            return of(Cause.RESIDENT, "the block is resident on this worker")
        if kind == REMOVED:
            if w.last_gap_batch > batch:
                return of(Cause.GAP, "evicted, but events were missed after the eviction")
            ts = w.batch_ts.get(batch)
            if batch in w.clear_batches:
                reason = f"cleared by a prefix-cache reset (AllBlocksCleared) at ts {ts}, not evicted for capacity"
                return of(Cause.RESET, reason, ts)
            return of(Cause.EVICTED, "removed within the retained window", ts)
        if now - w.epoch_since < self.window_s:
            return of(
                Cause.SHORT_HISTORY,
                f"the worker's event history (epoch {w.epoch!r}) is shorter than the {self.window_s:g} s window",
            )
        if w.last_gap_at is not None and now - w.last_gap_at < self.window_s:
            return of(Cause.GAP, "a gap in the event sequence lies within the window")
        if not w.complete:
            return of(
                Cause.RESIDENT_SET_UNKNOWN,
                "the worker's resident blocks are not all known (its events before the first one seen, or in a gap, "
                "were missed): the block may be resident",
            )
        if kind == AGED:
            return of(Cause.AGED, "the block may have been evicted before the retained window")
        return of(Cause.ABSENT, "absent, and the event history of the window is complete")

    # Introspection

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per worker: counters, sizes and the evidence state."""
        with self.lock:
            now = self.clock()
            out: dict[str, dict[str, Any]] = {}
            for name, w in sorted(self.workers.items()):
                self._release_held(w, now)
                self._advance(w, now)
                s = w.evidence.stats(settle=False)  # no table scan on the serving thread
                out[name] = {
                    "epoch": w.epoch,
                    "next_seq": w.next_seq,
                    "history_s": now - w.epoch_since,
                    "coverage": [
                        {"first_seq": int(a), "last_seq": int(b), "since_s_ago": now - t0, "until_s_ago": now - t1}
                        for a, b, t0, t1 in w.coverage
                    ],
                    "held_for_reorder": sorted(w.held),
                    "last_gap_age_s": None if w.last_gap_at is None else now - w.last_gap_at,
                    "lag_s": w.lag_s,
                    "groups": {str(g): w.group_kinds.get(g) for g in sorted(w.groups_seen | set(w.group_kinds))},
                    "resident": s.resident,
                    "evicted_retained": s.evidence,  # including expired entries not swept out yet
                    "expired": s.expired,
                    "memory_bytes": s.resident_bytes + s.evidence_bytes + s.filter_bytes,
                    "evidence_bytes": s.evidence_bytes,
                    "bytes_per_retained_entry": s.evidence_bytes / s.evidence if s.evidence else None,
                    "aged_filter_bits": s.filter_bits,
                    "aged_filter_rotations": s.rotations,
                    "resident_set_complete": w.complete,
                    "disconnected": w.disconnected,
                    "aged_filter_false_positive_rate": s.filter_false_positive_rate,
                    "counts": dict(sorted(w.counts.items())),
                }
            return out

    def close(self) -> None:
        with self.lock:
            for w in self.workers.values():
                w.evidence.close()
            self.workers.clear()


@dataclass(frozen=True, slots=True)
class _Part:
    """A run of a batch's events as the C apply takes it (one batch number): event kinds, offsets
    into the digests, the digests (keys of their groups). A ``cleared`` is a part of its own."""

    clear: bool
    kinds: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    digests: np.ndarray[Any, Any]


def _parts(events: Sequence[BlockEvent]) -> list[_Part]:
    """The batch's events split at every ``cleared`` (at least one part, maybe empty)."""
    runs: list[Sequence[BlockEvent]]
    if all(e.type is not EventType.CLEARED for e in events):
        runs = [events]  # the common case: one part
    else:
        runs = [[]]
        for e in events:
            if e.type is EventType.CLEARED:
                if e.block_hashes:
                    raise ValueError("a cleared event takes no block hashes")
                runs += [[e], []]
            else:
                runs[-1].append(e)  # type: ignore[attr-defined]
        runs = [r for r in runs if r] or [[]]
    parts = []
    for run in runs:
        kinds = np.fromiter((_KIND[e.type] for e in run), dtype=np.uint8, count=len(run))
        offsets = np.zeros(len(run) + 1, dtype=np.int64)
        keys = []
        for i, e in enumerate(run):
            keys.append(group_keys(digests_of(e.block_hashes), e.group))
            offsets[i + 1] = offsets[i] + len(e.block_hashes)
        digests = np.concatenate(keys) if keys else np.empty(0, dtype=np.int64)
        parts.append(_Part(bool(run) and run[0].type is EventType.CLEARED, kinds, offsets, digests))
    return parts


def digests_of(hashes: Sequence[int]) -> np.ndarray[Any, Any]:
    """block_digest of every hash, as int64: at numpy speed when they all fit in int64, or all in
    uint64 (same bits), else one by one."""
    try:
        return np.array(hashes, dtype=np.int64)
    except OverflowError:
        pass
    try:
        return np.array(hashes, dtype=np.uint64).view(np.int64)
    except OverflowError:
        return np.array([block_digest(h) for h in hashes], dtype=np.int64)
