"""The owner of one attribution shard: the evidence of the shard's workers (an AttributionStore),
the lease that makes this process their only owner, and the ZMQ subscribers of the shard's
workers that publish vLLM/SGLang KV events.

Workers are split into LITEHIT_ATTRIBUTION_SHARDS shards by a stable hash of their name
(the same one as online instances). Evidence lives in memory only: an owner that restarts starts
with no history, and its lookups answer unknown until a full window of events has arrived -- the
honest answer, since the evidence of that window is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from litehit.attribution.events import EventBatch
from litehit.attribution.store import ApplyResult, Attribution, AttributionStore, Cause, Lookup, not_probed
from litehit.db.models import AttributionShard, utcnow
from litehit.db.session import session_scope
from litehit.errors import NotShardOwner, WrongShard
from litehit.lease import Clock, Sessions, ShardLease, Sleep
from litehit.online.store import shard_of
from litehit.settings import Settings

__all__ = ["LEASE_S", "AttributionOwner"]

log = logging.getLogger("litehit.attribution")

LEASE_S = 15.0


class AttributionOwner:
    """The workers of shard ``settings.attribution_shard`` of ``settings.attribution_shards``."""

    def __init__(
        self,
        settings: Settings,
        *,
        sessions: Sessions | None = None,
        clock: Clock = utcnow,
        sleep: Sleep = time.sleep,
        lease_s: float = LEASE_S,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.shard, self.shards = settings.attribution_shard, settings.attribution_shards
        self.lease = ShardLease(
            AttributionShard,
            "attribution shard",
            self.shard,
            self.shards,
            sessions or partial(session_scope, settings.db_url),
            log,
            clock=clock,
            sleep=sleep,
            lease_s=lease_s,
        )
        self.store = AttributionStore(
            window_s=settings.attribution_window_s,
            bucket_s=settings.attribution_bucket_s,
            max_lag_s=settings.attribution_max_lag_s,
            filter_bits=settings.attribution_filter_bits,
            reorder_grace_s=settings.attribution_reorder_grace_s,
            clock=monotonic,
            wall=wall,
        )
        self.subscribers: list[Any] = []
        self.other_shard_lookups = 0  # lookups of workers another shard owns (answered unknown)

    # The lease and the subscribers

    def claim(self) -> None:
        self.lease.claim("LITEHIT_ATTRIBUTION_SHARD")

    def renew(self) -> bool:
        return self.lease.renew()

    @property
    def housekeeping_s(self) -> float:
        return self.lease.lease_s / 3

    def start(self) -> None:
        """After claim(): subscribes to the KV events of every configured worker of this shard."""
        from litehit.attribution.subscriber import KVEventSubscriber, parse_endpoints

        try:
            endpoints = parse_endpoints(self.settings.attribution_zmq)
        except ValueError as exc:
            raise RuntimeError(f"LITEHIT_ATTRIBUTION_ZMQ: {exc}") from None
        for ep in endpoints:
            if shard_of(ep.worker, self.shards) != self.shard:
                continue
            sub = KVEventSubscriber(
                ep.worker,
                ep.endpoint,
                self.deliver,
                replay_endpoint=ep.replay_endpoint,
                topic=ep.topic,
                on_disconnect=self.store.mark_disconnected,
                catch_up=True,
            )
            sub.start()
            self.subscribers.append(sub)
            log.info("subscribed to the KV events of worker %s at %s", ep.worker, ep.endpoint)

    def housekeep(self) -> None:
        """On the serving thread now and then: forgets workers idle for LITEHIT_ATTRIBUTION_FORGET_AFTER_S."""
        idle_s = self.settings.attribution_forget_after_s
        if idle_s > 0:
            for worker in self.store.forget_idle(idle_s):
                log.info("forgot worker %s: no events for %.0f s", worker, idle_s)

    def housekeep_in_thread(self) -> None:
        """Now and then, off the serving thread: evidence older than the window expires and its
        memory is given back, and batches held for reordering past their grace are applied, even
        when no lookup or event comes (the store takes its lock in short steps)."""
        self.store.expire()

    def deliver(self, worker: str, batch: EventBatch) -> None:
        """A subscriber's batch (called on its thread; the store has its own lock). The subscriber
        delivers in seq order (it fills what it can from the replay socket first), so a jump it
        delivers is a gap at once: nothing is held for reordering."""
        if self.lease.held:
            self.store.apply(worker, batch, may_reorder=False)

    def release(self) -> None:
        """At shutdown: subscribers stopped, the lease given up, the evidence freed."""
        for sub in self.subscribers:
            sub.stop()
        self.subscribers.clear()
        self.lease.release()
        self.store.close()

    def require_lease(self) -> None:
        if not self.lease.held:
            raise NotShardOwner(f"this process no longer owns attribution shard {self.shard}")

    # Events and lookups

    def owns(self, worker: str) -> bool:
        return shard_of(worker, self.shards) == self.shard

    def apply(self, worker: str, batch: EventBatch) -> ApplyResult:
        self.require_lease()
        if not self.owns(worker):
            raise WrongShard(f"worker {worker} belongs to attribution shard {shard_of(worker, self.shards)}")
        return self.store.apply(worker, batch)

    def lookup_many(self, items: Iterable[Lookup]) -> list[Attribution]:
        """Answers in order; a worker of another shard is answered unknown (its owner is elsewhere),
        or not_a_miss when the block lies beyond the lookup limit (no evidence needed for that)."""
        self.require_lease()
        pending = list(items)
        mine = [(i, q) for i, q in enumerate(pending) if self.owns(q.worker)]
        answers: list[Attribution] = [
            not_probed(q)
            or Attribution.of(
                Cause.OTHER_SHARD,
                f"worker {q.worker!r} belongs to attribution shard {shard_of(q.worker, self.shards)}",
                group=q.group,
            )
            for q in pending
        ]
        self.other_shard_lookups += len(pending) - len(mine)
        for (i, _), answer in zip(mine, self.store.lookup_many(q for _, q in mine), strict=True):
            answers[i] = answer
        return answers

    def workers(self) -> dict[str, dict[str, Any]]:
        """Per worker: the store's view, and its subscriber's counters; a subscribed worker that has
        sent nothing yet is listed too (``epoch`` None), so a wrong endpoint shows."""
        stats = self.store.stats()
        for sub in self.subscribers:
            stats.setdefault(sub.worker, {"epoch": None, "counts": {}})["subscriber"] = sub.stats()
        return dict(sorted(stats.items()))
