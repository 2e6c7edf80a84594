"""A deliberately naive model of the live attribution store's contract, for differential tests.

The contract (the lead's ``attrib_semantics``, implemented by ``litehit.attribution.store``):
bucket index ``b(t) = floor((t - t0) / bucket_s)``, ``n = ceil(window_s / bucket_s)``; a removal
record is retained as evidence iff its bucket is ``>= b(now) - n`` and it is its digest's latest
removal in the current epoch; an expired latest removal, and every digest of an epoch that a
restart ended, join the worker's "aged" set. Lookups check, in order: unknown worker, consumer lag,
resident (unknown when a gap came after the store), retained evidence (unknown when a gap came after
the removal), then absent (unknown when the epoch or a gap is younger than the window, or the digest
is aged; else no_recent_match).

No cleverness on purpose: per worker a dict of resident digests, a plain list of every removal
record ever made, and the aged set kept EXACTLY (a Python set, where the store keeps a Bloom filter:
the store may answer ``unknown`` where this model answers ``no_recent_match``, never the reverse).
Expiry is recomputed from the definitions by scanning every record on every call. Nothing is shared
with the store but :func:`block_digest`, which is a definition (how hashes become keys).

Readings of the contract this model takes where it is silent:
- a ``stored`` event for a digest that is already resident moves its store batch to this batch;
- ``lag`` is the value measured when the latest batch was applied; it does not grow between batches;
- batch numbers count applied batches of the worker across all its epochs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from litehit.attribution.events import EventBatch, EventType, block_digest


@dataclass
class Removal:
    """One removal of one digest: what the store's ring would hold for it."""

    digest: int
    at: float  # monotonic time of the apply
    bucket: int
    batch: int  # the worker's applied-batch number
    ts: float  # the batch's ts (the worker's wall clock)
    epoch: str


@dataclass
class Worker:
    epoch: str
    next_seq: int
    epoch_since: float
    previous_epochs: set[str] = field(default_factory=set)
    last_gap_at: float | None = None
    last_gap_batch: int | None = None
    resident: dict[int, int] = field(default_factory=dict)  # digest -> batch number that stored it
    removals: list[Removal] = field(default_factory=list)  # every removal ever, in apply order
    aged: set[int] = field(default_factory=set)  # exact: what the store's Bloom filter approximates
    lag: float = 0.0
    complete: bool = False  # the resident set is known: seen from seq 0 of the epoch or a clear, no gap since
    batches: int = 0  # applied batches
    duplicates: int = 0
    stale: int = 0
    gaps: int = 0


class OracleStore:
    """Same construction and method names as ``AttributionStore``; ``lookup`` returns
    ``(outcome, evicted_at)``."""

    def __init__(
        self,
        window_s: float,
        bucket_s: float,
        max_lag_s: float,
        filter_bits: int,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self.max_lag_s = max_lag_s
        self.filter_bits = filter_bits
        self.clock = clock
        self.wall = wall
        self.t0 = clock()
        self.n = math.ceil(window_s / bucket_s)
        self.workers: dict[str, Worker] = {}

    def bucket(self, t: float) -> int:
        return math.floor((t - self.t0) / self.bucket_s)

    def latest_removals(self, w: Worker) -> dict[int, Removal]:
        """Each digest's latest removal in the current epoch, retained or not (one scan of the list)."""
        latest: dict[int, Removal] = {}
        for r in w.removals:
            if r.epoch == w.epoch:
                latest[r.digest] = r
        return latest

    def expire(self, w: Worker, now: float) -> None:
        """Every digest whose latest removal of this epoch is older than the ring joins the aged set."""
        oldest_kept = self.bucket(now) - self.n
        w.aged |= {d for d, r in self.latest_removals(w).items() if r.bucket < oldest_kept}

    def evidence(self, w: Worker, digest: int, now: float) -> Removal | None:
        r = self.latest_removals(w).get(digest)
        if r is None or r.bucket < self.bucket(now) - self.n:
            return None
        return r

    def apply(self, worker: str, batch: EventBatch) -> str:
        now = self.clock()
        w = self.workers.get(worker)
        if w is not None:
            self.expire(w, now)
        if w is not None and batch.epoch in w.previous_epochs:
            w.stale += 1
            return "stale_epoch"
        if w is None or batch.epoch != w.epoch:
            if w is None:
                w = Worker(epoch=batch.epoch, next_seq=batch.seq, epoch_since=now)
                self.workers[worker] = w
                w.complete = batch.seq == 0
            else:
                w.aged |= set(w.resident)
                w.aged |= {r.digest for r in w.removals if r.epoch == w.epoch}
                w.previous_epochs.add(w.epoch)
                w.epoch = batch.epoch
                w.resident = {}
                w.epoch_since = now
                w.last_gap_at = None
                w.last_gap_batch = None
                w.next_seq = batch.seq
                w.complete = batch.seq == 0
            result = "new_epoch"
        elif batch.seq < w.next_seq:
            w.duplicates += 1
            return "duplicate"
        elif batch.seq > w.next_seq:
            w.last_gap_at = now
            w.last_gap_batch = w.batches + 1
            w.gaps += 1
            w.complete = False
            result = "gap"
        else:
            result = "applied"
        w.batches += 1
        number = w.batches
        for event in batch.events:
            if event.type == EventType.STORED:
                for h in event.block_hashes:
                    w.resident[block_digest(h)] = number
            elif event.type == EventType.REMOVED:
                for h in event.block_hashes:
                    self.remove(w, block_digest(h), now, number, batch)
            else:
                for d in list(w.resident):
                    self.remove(w, d, now, number, batch)
                w.complete = True
        w.next_seq = batch.seq + 1
        w.lag = max(0.0, self.wall() - batch.ts)
        return result

    def remove(self, w: Worker, digest: int, now: float, number: int, batch: EventBatch) -> None:
        w.resident.pop(digest, None)
        w.removals.append(Removal(digest, now, self.bucket(now), number, batch.ts, w.epoch))

    def lookup(self, worker: str, block_hash: int) -> tuple[str, float | None]:
        now = self.clock()
        w = self.workers.get(worker)
        if w is None:
            return ("unknown", None)
        self.expire(w, now)
        d = block_digest(block_hash)
        if w.lag > self.max_lag_s:
            return ("unknown", None)
        gap_batch = w.last_gap_batch
        if d in w.resident:
            if gap_batch is not None and gap_batch > w.resident[d]:
                return ("unknown", None)
            return ("resident", None)
        r = self.evidence(w, d, now)
        if r is not None:
            if gap_batch is not None and gap_batch > r.batch:
                return ("unknown", None)
            return ("evicted", r.ts)
        if now - w.epoch_since < self.window_s:
            return ("unknown", None)
        if w.last_gap_at is not None and now - w.last_gap_at < self.window_s:
            return ("unknown", None)
        if not w.complete:
            return ("unknown", None)
        if self.filter_bits > 0 and d in w.aged:
            return ("unknown", None)
        return ("no_recent_match", None)

    def lookup_many(self, worker_hashes: list[tuple[str, int]]) -> list[tuple[str, float | None]]:
        return [self.lookup(worker, h) for worker, h in worker_hashes]
