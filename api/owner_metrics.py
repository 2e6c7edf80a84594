"""An online owner's live state as Prometheus metrics, read at scrape time from its instances
(the same integer counters as ListInstances, so a scrape and ``GET /v1/online/instances`` agree):

- ``litehit_online_hit_tokens_total{instance, group, slot, capacity_gb}``: tokens that hit at a
  capacity slot (hit blocks x block size); ``capacity_gb="+Inf"`` is the theoretical maximum,
  shown when the group enables it;
- ``litehit_online_hit_rate{...}``: hit tokens / input tokens at that slot (0 before any);
- ``litehit_online_input_tokens_total{instance, group}`` and ``litehit_online_queries_total``;
- ``litehit_online_engine_memory_bytes{instance, group}``: the instance's engine memory;
- ``litehit_online_capacity_for_plateau_bytes{instance, group, fraction}``: the smallest capacity
  whose hits reach 50 / 90 / 99% of the infinite-capacity hits so far (the live curve);
- ``litehit_online_instances`` and ``litehit_online_shard_owned{shard}`` (1 while the lease is held).

Counters continue from the last snapshot after a restart (the counts since it are lost, which
Prometheus sees as a counter reset). Call collect() on the owner's event loop: only that thread
touches the cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from litehit.online.engine import PLATEAU_FRACTIONS
from litehit.online.owner import ShardOwner

__all__ = ["OwnerCollector"]


class OwnerCollector:
    """Reads the owner that `owner()` returns (None before the app has started)."""

    def __init__(self, owner: Callable[[], ShardOwner | None]) -> None:
        self.owner = owner

    def collect(self) -> Iterator[Metric]:
        owner = self.owner()
        if owner is None:
            return
        slot_labels = ["instance", "group", "slot", "capacity_gb"]
        hit_tokens = CounterMetricFamily(
            "litehit_online_hit_tokens", "Input tokens that hit at a capacity slot", labels=slot_labels
        )
        hit_rate = GaugeMetricFamily(
            "litehit_online_hit_rate", "Hit tokens / input tokens at a capacity slot", labels=slot_labels
        )
        input_tokens = CounterMetricFamily(
            "litehit_online_input_tokens", "Input tokens of the trace queries", labels=["instance", "group"]
        )
        queries = CounterMetricFamily("litehit_online_queries", "Trace queries applied", labels=["instance", "group"])
        memory = GaugeMetricFamily(
            "litehit_online_engine_memory_bytes", "Memory of the instance's engine", labels=["instance", "group"]
        )
        plateau = GaugeMetricFamily(
            "litehit_online_capacity_for_plateau_bytes",
            "Smallest capacity reaching a share of the infinite-capacity hits of the requests so far (live curve)",
            labels=["instance", "group", "fraction"],
        )
        for instance_id in sorted(owner.instances):
            view = owner.instances[instance_id].summary()
            inst = [instance_id, view["instance_group_name"]]
            slots = [
                (str(i), repr(float(gb)), tokens, rate)
                for i, (gb, tokens, rate) in enumerate(
                    zip(view["capacity_gb"], view["total_hit_tokens"], view["hit_rates"], strict=True)
                )
            ]
            if view["max_hit_blocks"] >= 0:  # the group shows the infinite capacity
                slots.append(("max", "+Inf", view["max_hit_blocks"] * view["block_size"], view["max_hit_rate"]))
            for slot, gb, tokens, rate in slots:
                hit_tokens.add_metric([*inst, slot, gb], tokens)
                hit_rate.add_metric([*inst, slot, gb], rate)
            input_tokens.add_metric(inst, view["total_input_tokens"])
            queries.add_metric(inst, view["total_queries"])
            memory.add_metric(inst, view["engine_memory_bytes"])
            live = owner.instances[instance_id]
            for fraction in PLATEAU_FRACTIONS:
                reached = live.plateau_capacity_bytes(fraction)
                if reached is not None:
                    plateau.add_metric([*inst, repr(fraction)], reached)
        yield from (hit_tokens, hit_rate, input_tokens, queries, memory, plateau)
        yield GaugeMetricFamily("litehit_online_instances", "Live instances of this owner", value=len(owner.instances))
        owned = GaugeMetricFamily(
            "litehit_online_shard_owned", "1 while this owner holds its shard's lease", labels=["shard"]
        )
        owned.add_metric([str(owner.shard)], 1 if owner.leased else 0)
        yield owned
