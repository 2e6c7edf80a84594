"""The attribution store: per worker, the evidence of its KV events, and the four-outcome answer
to "why did this lookup miss?" (seed 003). The owner process holds one store for its shard.

The contract (README "Live miss attribution" has the user's version):

- Time. ``clock`` is the owner's monotonic clock (expiry never follows wall-clock corrections),
  ``wall`` its wall clock (only for consumer lag). Bucket b(t) = floor((t - t0) / bucket_s);
  with n = ceil(window_s / bucket_s) the store retains the removals of buckets b(now) - n ..
  b(now): at least ``window_s``, at most ``window_s + bucket_s``. Older removals expire into the
  worker's aged filter (a Bloom filter: it may claim a digest it never saw, never the opposite).
- Batches (``apply``). Per worker, within one epoch, seq grows by 1 per batch. A new epoch (one the
  worker never had) is a restart: everything known of the old epoch goes into the aged filter and
  the worker starts empty; a batch of one of its last 64 earlier epochs is ignored ("stale_epoch"),
  an older one counts as a new epoch again. A seq jump is
  a gap: the batch applies and the gap is remembered; a seq at or below the last is ignored
  ("duplicate"). Applied batches are numbered 1, 2, ... per worker; lag = wall() - batch ts.
- Lookups, checked in this order: unknown worker -> unknown; its event source disconnected (the ZMQ
  subscriber says so; until its next batch) -> unknown; lag above ``max_lag_s`` -> unknown;
  resident -> resident (unknown when a gap came after its store); removal evidence in the window ->
  evicted with the removing batch's ts (unknown when a gap came after it); absent -> unknown when
  the epoch began within the window, a gap lies within the window, the worker's resident set is
  not complete (its stream was not seen from the epoch's seq 0, or a gap came, and no `cleared`
  since: a block stored then may be resident), or the aged filter holds the digest; otherwise
  no_recent_match.
- The aged filter has two generations of ``filter_bits`` bits; a generation takes
  ``filter_generation`` digests (default: about 1 % false positives when full), then becomes the
  previous one and the one before is forgotten. So it never saturates, and an eviction older than
  the window is remembered for at least one generation's worth of later evictions.

Nothing is shared between workers. Thread-safe: one lock guards the store (the ZMQ subscribers
deliver from their threads, HTTP requests from the event loop).
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
from litehit.attribution.events import EventBatch, EventType, block_digest

__all__ = ["ApplyResult", "Attribution", "AttributionStore", "Outcome"]

_KIND = {EventType.STORED: 0, EventType.REMOVED: 1, EventType.CLEARED: 2}
_PAST_EPOCHS = 64  # earlier epochs of a worker remembered to recognise their late batches
_COVERAGE_INTERVALS = 32  # intervals of applied seqs kept per worker (for /v1/attribution/workers)
GENERATION_LOAD = 0.0809
"""Digests per bit of an aged-filter generation: with three probes, a full generation answers
about 1 % of never-seen digests positive ((1 - exp(-3 * 0.0809)) ** 3 = 0.0100)."""


class Outcome(enum.StrEnum):
    RESIDENT = "resident"
    EVICTED = "evicted"
    NO_RECENT_MATCH = "no_recent_match"
    UNKNOWN = "unknown"


class ApplyResult(enum.StrEnum):
    APPLIED = "applied"
    GAP = "gap"  # applied after a seq jump: the missing batches are a gap in the evidence
    NEW_EPOCH = "new_epoch"  # applied as the first batch of a new epoch (a restart)
    DUPLICATE = "duplicate"  # seq at or below the last applied one: ignored
    STALE_EPOCH = "stale_epoch"  # a batch of an earlier epoch: ignored


@dataclass(frozen=True, slots=True)
class Attribution:
    outcome: Outcome
    reason: str
    evicted_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "reason": self.reason, "evicted_at": self.evicted_at}


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
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s}")
        if not (math.isfinite(bucket_s) and bucket_s > 0):
            raise ValueError(f"bucket_s must be a positive number of seconds, got {bucket_s}")
        if not max_lag_s >= 0:
            raise ValueError(f"max_lag_s must be >= 0, got {max_lag_s}")
        if filter_bits != 0 and (filter_bits < 64 or filter_bits & (filter_bits - 1)):
            raise ValueError(f"filter_bits must be 0 or a power of two >= 64, got {filter_bits}")
        self.window_s, self.bucket_s, self.max_lag_s = window_s, bucket_s, max_lag_s
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
        self.unknown_worker_lookups = 0  # lookups of workers with no events (answered unknown)
        self.lock = threading.Lock()

    def bucket_of(self, t: float) -> int:
        return max(0, math.floor((t - self.t0) / self.bucket_s))

    # Events

    def apply(self, worker: str, batch: EventBatch) -> ApplyResult:
        """Applies one batch of a worker's events (see the module docstring)."""
        if batch.seq < 0:
            raise ValueError(f"seq must be >= 0, got {batch.seq}")
        if not math.isfinite(batch.ts):
            raise ValueError(f"ts must be a finite number of seconds, got {batch.ts}")
        kinds, offsets, digests = _arrays(batch)
        with self.lock:
            now = self.clock()
            w = self.workers.get(worker)
            if w is not None:
                w.last_batch_at = now
            result = ApplyResult.APPLIED
            if w is None or batch.epoch != w.epoch:
                if w is not None and batch.epoch in w.past_epochs:
                    w.count("stale_epoch_batches")
                    return ApplyResult.STALE_EPOCH
                w = self._new_epoch(worker, w, batch, now)
                result = ApplyResult.NEW_EPOCH
            elif batch.seq < w.next_seq:
                w.count("duplicate_batches")
                return ApplyResult.DUPLICATE
            self._advance(w, now)
            if batch.seq > w.next_seq:
                w.count("gaps")
                w.count("missing_batches", batch.seq - w.next_seq)
                w.last_gap_at, w.last_gap_batch = now, w.batch + 1
                w.complete = False
                result = ApplyResult.GAP
            if w.batch >= MAX_BATCH:  # ~4e9 batches in one epoch: start the numbering again, conservatively
                self._restart_history(w, now)
            w.batch += 1
            w.evidence.apply(w.batch, kinds, offsets, digests)
            if result is ApplyResult.APPLIED and w.coverage:
                w.coverage[-1][1], w.coverage[-1][3] = batch.seq, now
            else:  # the first batch of an epoch, or the first after a gap
                w.coverage.append([batch.seq, batch.seq, now, now])
            if any(e.type is EventType.CLEARED for e in batch.events):
                w.complete = True  # nothing is resident but what this batch stored after the clear
            w.batch_ts[w.batch] = batch.ts
            w.batch_buckets.append((self.bucket_of(now), w.batch))
            w.next_seq = batch.seq + 1
            w.disconnected = False
            w.lag_s = max(0.0, self.wall() - batch.ts)
            w.count("batches")
            for event in batch.events:
                w.count(f"{event.type.value}_events")
                w.count(f"{event.type.value}_blocks", len(event.block_hashes))
            return result

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
            w.count("restarts")
        return w

    def _restart_history(self, w: _Worker, now: float) -> None:
        """What the worker knew becomes aged evidence; its history starts now."""
        w.evidence.forget()
        w.complete = False  # what was resident is forgotten
        w.batch = 0
        w.batch_ts.clear()
        w.batch_buckets.clear()
        w.epoch_since = now
        w.last_gap_batch = 0

    def _advance(self, w: _Worker, now: float) -> None:
        bucket = self.bucket_of(now)
        w.evidence.advance(bucket)
        oldest = bucket - self.buckets
        while w.batch_buckets and w.batch_buckets[0][0] < oldest:
            del w.batch_ts[w.batch_buckets.popleft()[1]]

    # Lookups

    def lookup(self, worker: str, block_hash: int) -> Attribution:
        return self.lookup_many([(worker, block_hash)])[0]

    def lookup_many(self, items: Iterable[tuple[str, int]]) -> list[Attribution]:
        """Answers each (worker, first uncached block hash), in order."""
        pending = [(worker, block_digest(h)) for worker, h in items]
        with self.lock:
            now = self.clock()
            by_worker: dict[str, list[int]] = {}
            for i, (worker, _) in enumerate(pending):
                by_worker.setdefault(worker, []).append(i)
            answers: list[Attribution | None] = [None] * len(pending)
            for worker, positions in by_worker.items():
                w = self.workers.get(worker)
                if w is None:
                    for i in positions:
                        answers[i] = Attribution(Outcome.UNKNOWN, f"no events from worker {worker!r}")
                    self.unknown_worker_lookups += len(positions)
                    continue
                self._advance(w, now)
                kinds, batches = w.evidence.lookup(np.array([pending[i][1] for i in positions], dtype=np.int64))
                for i, kind, batch in zip(positions, kinds.tolist(), batches.tolist(), strict=True):
                    answers[i] = self._answer(w, now, kind, batch)
                    w.count(f"lookups_{answers[i].outcome.value}")  # type: ignore[union-attr]
            return [a for a in answers if a is not None]

    def _answer(self, w: _Worker, now: float, kind: int, batch: int) -> Attribution:
        if w.disconnected:
            return Attribution(Outcome.UNKNOWN, "the worker's event stream is disconnected: events may be missing")
        if w.lag_s > self.max_lag_s:
            return Attribution(Outcome.UNKNOWN, f"consumer lag {w.lag_s:.3f} s is above max_lag_s {self.max_lag_s:g} s")
        if kind == RESIDENT:
            if w.last_gap_batch > batch:
                return Attribution(Outcome.UNKNOWN, "resident, but events were missed after it was stored")
            return Attribution(Outcome.RESIDENT, "the block is resident on this worker")
        if kind == REMOVED:
            if w.last_gap_batch > batch:
                return Attribution(Outcome.UNKNOWN, "evicted, but events were missed after the eviction")
            return Attribution(Outcome.EVICTED, "removed within the retained window", w.batch_ts.get(batch))
        if now - w.epoch_since < self.window_s:
            return Attribution(
                Outcome.UNKNOWN,
                f"the worker's event history (epoch {w.epoch!r}) is shorter than the {self.window_s:g} s window",
            )
        if w.last_gap_at is not None and now - w.last_gap_at < self.window_s:
            return Attribution(Outcome.UNKNOWN, "a gap in the event sequence lies within the window")
        if not w.complete:
            return Attribution(
                Outcome.UNKNOWN,
                "the worker's resident blocks are not all known (its events before the first one seen, or in a gap, "
                "were missed): the block may be resident",
            )
        if kind == AGED:
            return Attribution(Outcome.UNKNOWN, "the block may have been evicted before the retained window")
        return Attribution(Outcome.NO_RECENT_MATCH, "absent, and the event history of the window is complete")

    # Introspection

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per worker: counters, sizes and the evidence state."""
        with self.lock:
            now = self.clock()
            out: dict[str, dict[str, Any]] = {}
            for name, w in sorted(self.workers.items()):
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
                    "last_gap_age_s": None if w.last_gap_at is None else now - w.last_gap_at,
                    "lag_s": w.lag_s,
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


def _arrays(batch: EventBatch) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The batch as the C apply takes it: event kinds, offsets into the digests, the digests."""
    kinds = np.fromiter((_KIND[e.type] for e in batch.events), dtype=np.uint8, count=len(batch.events))
    offsets = np.zeros(len(batch.events) + 1, dtype=np.int64)
    parts = []
    for i, e in enumerate(batch.events):
        if e.type is EventType.CLEARED and e.block_hashes:
            raise ValueError("a cleared event takes no block hashes")
        parts.append(digests_of(e.block_hashes))
        offsets[i + 1] = offsets[i] + len(e.block_hashes)
    digests = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return kinds, offsets, digests


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
