"""A deliberately naive model of the live attribution store's contract, for differential tests.

The contract (the lead's ``attrib_semantics``, implemented by ``litehit.attribution.store``):
bucket index ``b(t) = floor((t - t0) / bucket_s)``, ``n = ceil(window_s / bucket_s)``; a removal
record is retained as evidence iff its bucket is ``>= b(now) - n`` and it is its key's latest
removal in the current epoch; an expired latest removal, and every key of an epoch that a
restart ended, join the worker's "aged" set. A key is a (KV-cache group, digest) pair: an event
without a group is of group 0, and a ``cleared`` removes the resident keys of every group.

Batches of the current epoch: a seq below the next one, or one already held, is a duplicate; one
beyond the next one is held while ``reorder_grace_s > 0`` and the source may reorder; held batches
go in seq order as soon as they are next, and the first of them goes as a gap once the missing seq
before it has been waited for ``reorder_grace_s`` (counted from the earliest arrival among the
held batches); more than 1024 held force the first out as a gap; a new epoch first lets every held
batch of the old one go. Held batches are looked at whenever a batch or a lookup of the worker
comes (after an incoming batch itself has been dealt with; before a lookup is answered).

Lookups check, in order: the block at or beyond the lookup limit (not_a_miss), unknown worker,
disconnected, held batches (pending), consumer lag, the group (named, or the one group declared
full attention, or group 0 while no other group was named and group 0 has no declared kind), then
resident (unknown when a gap came after the store), retained evidence (evicted, cause "reset" when
a clear removed it; unknown when a gap came after the removal), then absent (unknown when the
epoch or a gap is younger than the window, the resident set is not known, or the key is aged;
else no_recent_match).

No cleverness on purpose: per worker a dict of resident keys, a plain list of every removal
record ever made, and the aged set kept EXACTLY (a Python set, where the store keeps a Bloom filter:
the store may answer ``unknown`` where this model answers ``no_recent_match``, never the reverse).
Expiry is recomputed from the definitions by scanning every record on every call. Nothing is shared
with the store but :func:`block_digest`, which is a definition (how hashes become digests).

Readings of the contract this model takes where it is silent:
- a ``stored`` event for a key that is already resident moves its store batch to this batch;
- ``lag`` is the value measured when the latest batch was applied; it does not grow between batches;
- batch numbers count applied batch parts of the worker across all its epochs (a batch is cut into
  parts at each ``cleared``, which is a part of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from litehit.attribution.events import EventBatch, EventType, block_digest

FULL_ATTENTION = {"full_attention", "mla_attention", "sink_full_attention"}
HELD_AT_MOST = 1024

Key = tuple[int, int]  # (group, digest)


@dataclass(frozen=True)
class Answer:
    outcome: str
    evicted_at: float | None
    cause: str
    group: int | None = None

    def pair(self) -> tuple[str, float | None]:
        return (self.outcome, self.evicted_at)


@dataclass
class Removal:
    """One removal of one key: what the store's ring would hold for it."""

    key: Key
    at: float  # monotonic time of the apply
    bucket: int
    batch: int  # the worker's applied-batch (part) number
    ts: float  # the batch's ts (the worker's wall clock)
    epoch: str
    by_clear: bool


@dataclass
class Worker:
    epoch: str
    next_seq: int
    epoch_since: float
    previous_epochs: set[str] = field(default_factory=set)
    last_gap_at: float | None = None
    last_gap_batch: int | None = None
    resident: dict[Key, int] = field(default_factory=dict)  # key -> batch number that stored it
    removals: list[Removal] = field(default_factory=list)  # every removal ever, in apply order
    aged: set[Key] = field(default_factory=set)  # exact: what the store's Bloom filter approximates
    lag: float = 0.0
    complete: bool = False  # the resident set is known: seen from seq 0 of the epoch or a clear, no gap since
    disconnected: bool = False
    held: list[tuple[EventBatch, float]] = field(default_factory=list)  # (batch, arrival), arrival order
    groups_named: set[int] = field(default_factory=set)
    kinds: dict[int, str] = field(default_factory=dict)
    batches: int = 0  # applied batch parts
    duplicates: int = 0
    stale: int = 0
    gaps: int = 0


class OracleStore:
    """Same construction and method names as ``AttributionStore``; ``lookup`` returns an
    :class:`Answer`."""

    def __init__(
        self,
        window_s: float,
        bucket_s: float,
        max_lag_s: float,
        filter_bits: int,
        clock: Callable[[], float],
        wall: Callable[[], float],
        reorder_grace_s: float = 0.0,
    ) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self.max_lag_s = max_lag_s
        self.filter_bits = filter_bits
        self.grace = reorder_grace_s
        self.clock = clock
        self.wall = wall
        self.t0 = clock()
        self.n = math.ceil(window_s / bucket_s)
        self.workers: dict[str, Worker] = {}

    def bucket(self, t: float) -> int:
        return math.floor((t - self.t0) / self.bucket_s)

    def latest_removals(self, w: Worker) -> dict[Key, Removal]:
        """Each key's latest removal in the current epoch, retained or not (one scan of the list)."""
        latest: dict[Key, Removal] = {}
        for r in w.removals:
            if r.epoch == w.epoch:
                latest[r.key] = r
        return latest

    def expire(self, w: Worker, now: float) -> None:
        """Every key whose latest removal of this epoch is older than the ring joins the aged set."""
        oldest_kept = self.bucket(now) - self.n
        w.aged |= {k for k, r in self.latest_removals(w).items() if r.bucket < oldest_kept}

    def evidence(self, w: Worker, key: Key, now: float) -> Removal | None:
        r = self.latest_removals(w).get(key)
        if r is None or r.bucket < self.bucket(now) - self.n:
            return None
        return r

    # -- batches ------------------------------------------------------------------------------

    def apply(self, worker: str, batch: EventBatch, may_reorder: bool = True) -> str:
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
            else:
                while w.held:  # the old epoch's held batches go first
                    self.let_one_go(w, now, as_gap_if_needed=True)
                w.aged |= set(w.resident)
                w.aged |= {r.key for r in w.removals if r.epoch == w.epoch}
                w.previous_epochs.add(w.epoch)
                w.epoch = batch.epoch
                w.resident = {}
                w.epoch_since = now
                w.last_gap_at = None
                w.last_gap_batch = None
                w.next_seq = batch.seq
                w.groups_named = set()
                w.kinds = {}
            w.complete = batch.seq == 0
            self.run(w, batch, now)
            return "new_epoch"
        if batch.seq < w.next_seq or any(b.seq == batch.seq for b, _ in w.held):
            w.duplicates += 1
            return "duplicate"
        if batch.seq > w.next_seq and may_reorder and self.grace > 0:
            w.held.append((batch, now))
            if len(w.held) > HELD_AT_MOST:
                self.let_one_go(w, now, as_gap_if_needed=True)
                while self.next_is_held(w):
                    self.let_one_go(w, now, as_gap_if_needed=False)
            self.look_at_held(w, now)
            return "held"
        result = self.run(w, batch, now)
        self.look_at_held(w, now)
        return result

    def next_is_held(self, w: Worker) -> bool:
        return any(b.seq == w.next_seq for b, _ in w.held)

    def let_one_go(self, w: Worker, now: float, as_gap_if_needed: bool) -> None:
        first = min(w.held, key=lambda item: item[0].seq)
        assert as_gap_if_needed or first[0].seq == w.next_seq
        w.held.remove(first)
        self.run(w, first[0], now)

    def look_at_held(self, w: Worker, now: float) -> None:
        while w.held:
            if self.next_is_held(w):
                self.let_one_go(w, now, as_gap_if_needed=False)
            elif now - min(arrived for _, arrived in w.held) >= self.grace:
                self.let_one_go(w, now, as_gap_if_needed=True)
            else:
                return

    def run(self, w: Worker, batch: EventBatch, now: float) -> str:
        """Applies a batch of the current epoch with seq >= next_seq."""
        result = "applied"
        if batch.seq > w.next_seq:
            w.last_gap_at = now
            w.last_gap_batch = w.batches + 1
            w.gaps += 1
            w.complete = False
            result = "gap"
        parts: list[list[Any]] = [[]]
        for event in batch.events:
            if event.type == EventType.CLEARED:
                parts.append([event])
                parts.append([])
            else:
                parts[-1].append(event)
        parts = [p for p in parts if p] or [[]]
        for part in parts:
            w.batches += 1
            number = w.batches
            for event in part:
                group = event.group if event.group is not None else 0
                if event.type == EventType.STORED:
                    for h in event.block_hashes:
                        w.resident[(group, block_digest(h))] = number
                elif event.type == EventType.REMOVED:
                    for h in event.block_hashes:
                        self.remove(w, (group, block_digest(h)), now, number, batch, by_clear=False)
                else:
                    for key in list(w.resident):
                        self.remove(w, key, now, number, batch, by_clear=True)
                    w.complete = True
                if event.type != EventType.CLEARED:
                    w.groups_named.add(group)
                    if event.type == EventType.STORED and event.group_kind:
                        w.kinds[group] = event.group_kind
        w.next_seq = batch.seq + 1
        w.disconnected = False
        w.lag = max(0.0, self.wall() - batch.ts)
        return result

    def remove(self, w: Worker, key: Key, now: float, number: int, batch: EventBatch, *, by_clear: bool) -> None:
        w.resident.pop(key, None)
        w.removals.append(Removal(key, now, self.bucket(now), number, batch.ts, w.epoch, by_clear))

    def mark_disconnected(self, worker: str) -> None:
        if worker in self.workers:
            self.workers[worker].disconnected = True

    # -- lookups ------------------------------------------------------------------------------

    def lookup(
        self,
        worker: str,
        block_hash: int | bytes,
        group: int | None = None,
        block_index: int | None = None,
        lookup_limit: int | None = None,
    ) -> Answer:
        now = self.clock()
        w = self.workers.get(worker)
        if w is not None:
            self.look_at_held(w, now)
            self.expire(w, now)
        if block_index is not None and lookup_limit is not None and block_index >= lookup_limit:
            return Answer("not_a_miss", None, "beyond_lookup_limit", group)
        if w is None:
            return Answer("unknown", None, "no_events", group)
        if w.disconnected:
            return Answer("unknown", None, "disconnected", group)
        if w.held:
            return Answer("unknown", None, "pending", group)
        if w.lag > self.max_lag_s:
            return Answer("unknown", None, "lag", group)
        if group is None:
            declared_full = [g for g, kind in w.kinds.items() if kind in FULL_ATTENTION]
            if len(declared_full) == 1:
                group = declared_full[0]
            elif not declared_full and w.groups_named in (set(), {0}) and 0 not in w.kinds:
                group = 0
            else:
                return Answer("unknown", None, "group_unknown", None)
        key = (group, block_digest(block_hash))
        gap_batch = w.last_gap_batch
        if key in w.resident:
            if gap_batch is not None and gap_batch > w.resident[key]:
                return Answer("unknown", None, "gap", group)
            return Answer("resident", None, "resident", group)
        r = self.evidence(w, key, now)
        if r is not None:
            if gap_batch is not None and gap_batch > r.batch:
                return Answer("unknown", None, "gap", group)
            return Answer("evicted", r.ts, "reset" if r.by_clear else "evicted", group)
        if now - w.epoch_since < self.window_s:
            return Answer("unknown", None, "short_history", group)
        if w.last_gap_at is not None and now - w.last_gap_at < self.window_s:
            return Answer("unknown", None, "gap", group)
        if not w.complete:
            return Answer("unknown", None, "resident_set_unknown", group)
        if self.filter_bits > 0 and key in w.aged:
            return Answer("unknown", None, "aged", group)
        return Answer("no_recent_match", None, "absent", group)

    def lookup_many(self, worker_hashes: list[tuple[str, int]]) -> list[Answer]:
        return [self.lookup(worker, h) for worker, h in worker_hashes]
