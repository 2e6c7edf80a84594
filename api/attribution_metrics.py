"""Prometheus metrics of an attribution owner, read from its store at scrape time: lookups by
worker, outcome and cause, event blocks and batches by worker, evidence memory, bytes per retained
entry, consumer lag; plus the insert and lookup latency histograms the routes observe."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from litehit.attribution.answers import OUTCOME_OF, Cause
from litehit.attribution.owner import AttributionOwner

__all__ = ["AttributionCollector", "Latency"]

_WORKER_CAUSES = [c for c in Cause if c not in (Cause.NO_EVENTS, Cause.OTHER_SHARD, Cause.OWNER_UNREACHABLE)]
"""The causes an answer about a worker with events can have (the others are counted by
litehit_attribution_unowned_lookups_total, or by the public API)."""
_EVENTS = ("stored", "removed", "cleared")
_BATCHES = {
    "batches": "applied",
    "held_batches": "held",
    "duplicate_batches": "duplicate",
    "stale_epoch_batches": "stale_epoch",
}


class Latency:
    """Time spent in the store per event batch and per lookup request (HTTP handling excluded)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        buckets = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 1.0)
        self.apply = Histogram(
            "litehit_attribution_apply_seconds",
            "Time to apply one event batch to the evidence",
            registry=registry,
            buckets=buckets,
        )
        self.lookup = Histogram(
            "litehit_attribution_lookup_seconds",
            "Time to answer one lookup request (single or batch) from the evidence",
            registry=registry,
            buckets=buckets,
        )


class AttributionCollector(Collector):
    def __init__(self, owner: Callable[[], AttributionOwner | None]) -> None:
        self.owner = owner

    def collect(self) -> Iterator[Any]:
        owner = self.owner()
        workers = owner.workers() if owner is not None and owner.lease.held else {}
        lookups = CounterMetricFamily(
            "litehit_attribution_lookups",
            "Lookups answered, by worker, outcome and cause (evicted: cause evicted or reset, a prefix-cache reset)",
            labels=["worker", "outcome", "cause"],
        )
        blocks = CounterMetricFamily(
            "litehit_attribution_event_blocks",
            "Block hashes received in events, by worker and type",
            labels=["worker", "type"],
        )
        batches = CounterMetricFamily(
            "litehit_attribution_batches",
            "Event batches received, by worker and what became of them",
            labels=["worker", "result"],
        )
        gaps = CounterMetricFamily("litehit_attribution_gaps", "Sequence gaps in the event stream", labels=["worker"])
        restarts = CounterMetricFamily("litehit_attribution_restarts", "Epoch changes (restarts)", labels=["worker"])
        memory = GaugeMetricFamily(
            "litehit_attribution_memory_bytes", "Evidence memory of the worker", labels=["worker"]
        )
        retained = GaugeMetricFamily(
            "litehit_attribution_retained_evictions", "Removed blocks with retained evidence", labels=["worker"]
        )
        per_entry = GaugeMetricFamily(
            "litehit_attribution_retained_entry_bytes",
            "Bytes of the eviction table per retained entry (measured: table size / entries)",
            labels=["worker"],
        )
        lag = GaugeMetricFamily(
            "litehit_attribution_lag_seconds", "Consumer lag of the latest batch", labels=["worker"]
        )
        unowned = CounterMetricFamily(
            "litehit_attribution_unowned_lookups",
            "Lookups no evidence here is about: a worker with no events, or one of another shard (answered unknown, "
            "or not_a_miss beyond the lookup limit)",
            labels=["why"],
        )
        subscriber = CounterMetricFamily(
            "litehit_attribution_subscriber_events",
            "What the ZMQ KV-event subscriber of a worker counted (batches, decode errors, gaps, disconnects, ...)",
            labels=["worker", "counter"],
        )
        if owner is not None and owner.lease.held:
            unowned.add_metric(["no_events"], owner.store.unknown_worker_lookups)
            unowned.add_metric(["other_shard"], owner.other_shard_lookups)
        for worker, s in workers.items():
            for name, value in sorted(s.get("subscriber", {}).items()):
                if name != "last_seq":
                    subscriber.add_metric([worker, name], value)
            if s["epoch"] is None:  # subscribed, nothing received yet
                continue
            counts = s["counts"]
            for cause in _WORKER_CAUSES:
                lookups.add_metric(
                    [worker, OUTCOME_OF[cause].value, cause.value], counts.get(f"cause_{cause.value}", 0)
                )
            for kind in _EVENTS:
                blocks.add_metric([worker, kind], counts.get(f"{kind}_blocks", 0))
            for name, result in _BATCHES.items():
                batches.add_metric([worker, result], counts.get(name, 0))
            gaps.add_metric([worker], counts.get("gaps", 0))
            restarts.add_metric([worker], counts.get("restarts", 0))
            memory.add_metric([worker], s["memory_bytes"])
            retained.add_metric([worker], s["evicted_retained"])
            if s["bytes_per_retained_entry"] is not None:
                per_entry.add_metric([worker], s["bytes_per_retained_entry"])
            lag.add_metric([worker], s["lag_s"])
        yield from (lookups, blocks, batches, gaps, restarts, memory, retained, per_entry, lag, unowned, subscriber)
