"""A deliberately naive multi-tier LRU, for differential tests of the tier split (litehit.tiers).

Nothing is shared with the engine (no litehit, no core_c): the tiers are simulated from their
definition, one explicit LRU list per tier (an OrderedDict, last = MRU), request after request:

- lookup, on the snapshot before the request: walk the keys in order; a key resident in some
  tier and alive under the TTL is a hit served by that tier; the first key that is not (cold or
  expired) ends the prefix;
- commit: touch every key of the request from the tail to the head (the head ends most recent),
  each touch setting the key's last access to the request's time.

Exclusive (ExclusiveTiers): a touched key leaves whatever tier held it and enters T1 at the MRU
end (promote on hit); a tier over its capacity moves its LRU victim to the MRU end of the next
tier (demote on evict); the last tier drops its victim. There is no single recency list sliced by
cumulative capacity here: that equivalence is what the tests check against the engine.

Inclusive (InclusiveTiers): every tier is an independent LRU of its own capacity over every
touch (write-through); a hit is served by the first tier holding the key.

TTL (ttl_ns > 0): a key is alive iff now - last access < ttl_ns. Expired keys keep their list
positions (they are simply never hits) unless drop_expired=True, which purges them from every
tier before each lookup: both variants exist so that a test can show they agree.

Capacities are whole blocks; None is an infinite tier.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

Key = Hashable
Capacity = int | None  # None: infinite


class _Tiers:
    def __init__(self, capacities: Sequence[Capacity], ttl_ns: int = 0, *, drop_expired: bool = False) -> None:
        assert capacities, "at least one tier"
        assert all(c is None or c >= 0 for c in capacities)
        self.capacities = list(capacities)
        self.ttl_ns = ttl_ns
        self.drop_expired = drop_expired
        self.tiers: list[OrderedDict[Key, int]] = [OrderedDict() for _ in capacities]  # key -> last access

    def _alive(self, last: int, now: int) -> bool:
        return self.ttl_ns == 0 or now - last < self.ttl_ns

    def _purge(self, now: int) -> None:
        for tier in self.tiers:
            for key in [k for k, t in tier.items() if not self._alive(t, now)]:
                del tier[key]

    def _find(self, key: Key) -> int | None:
        """The index of the first tier holding the key (alive or not), or None."""
        for i, tier in enumerate(self.tiers):
            if key in tier:
                return i
        return None

    def lookup(self, keys: Sequence[Key], now: int) -> list[int]:
        """Hit blocks served by each tier (the snapshot: nothing is touched)."""
        served = [0] * len(self.tiers)
        for key in keys:
            i = self._find(key)
            if i is None or not self._alive(self.tiers[i][key], now):
                break
            served[i] += 1
        return served

    def touch(self, key: Key, now: int) -> None:
        raise NotImplementedError

    def request(self, keys: Sequence[Key], now: int) -> list[int]:
        """Per tier, the hit blocks it served to this request; then commit the request."""
        if self.drop_expired and self.ttl_ns:
            self._purge(now)
        served = self.lookup(keys, now)
        for key in reversed(keys):  # tail to head: the head ends most recently used
            self.touch(key, now)
        return served

    def resident(self) -> list[list[Key]]:
        """Each tier's keys, MRU first."""
        return [list(reversed(tier)) for tier in self.tiers]


class ExclusiveTiers(_Tiers):
    """Demote on evict, promote on hit: a key is in at most one tier."""

    def touch(self, key: Key, now: int) -> None:
        for tier in self.tiers:  # promote: out of whichever tier held it
            tier.pop(key, None)
        self.tiers[0][key] = now  # MRU end of T1
        for i, (tier, cap) in enumerate(zip(self.tiers, self.capacities, strict=True)):
            while cap is not None and len(tier) > cap:  # overflow: the LRU victim goes down
                victim, last = tier.popitem(last=False)
                if i + 1 < len(self.tiers):
                    below = self.tiers[i + 1]
                    below[victim] = last
                    below.move_to_end(victim)  # MRU end of the next tier
                # the last tier drops its victim


class InclusiveTiers(_Tiers):
    """Write-through: every tier an independent LRU of its own capacity over every touch."""

    def touch(self, key: Key, now: int) -> None:
        for tier, cap in zip(self.tiers, self.capacities, strict=True):
            tier[key] = now
            tier.move_to_end(key)
            while cap is not None and len(tier) > cap:
                tier.popitem(last=False)


def simulate(
    requests: Sequence[Sequence[Key]],
    times: Sequence[int],
    capacities: Sequence[Capacity],
    *,
    inclusive: bool = False,
    ttl_ns: int = 0,
    drop_expired: bool = False,
) -> list[list[int]]:
    """Per request, the hit blocks each tier served (not cumulative)."""
    cls = InclusiveTiers if inclusive else ExclusiveTiers
    sim = cls(capacities, ttl_ns, drop_expired=drop_expired)
    return [sim.request(keys, now) for keys, now in zip(requests, times, strict=True)]


# ---------------------------------------------------------------------------------------------
# capacity units, tier sums and the prefill estimate, from their written definitions


def capacity_in_blocks(text: str, block_size: int, block_bytes: int) -> Capacity:
    """``inf``, ``Nblocks``, ``Ntokens`` (N // block_size), ``NB``/``NKiB``/``NMiB``/``NGiB`` (bytes
    // block_bytes): whole blocks of one lane."""
    t = text.strip()
    if t == "inf":
        return None
    for suffix, per in (("blocks", None), ("tokens", block_size)):
        if t.endswith(suffix):
            n = int(t.removesuffix(suffix))
            return n if per is None else n // per
    for suffix, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("B", 1)):
        if t.endswith(suffix):
            return int(t.removesuffix(suffix)) * scale // block_bytes
    raise ValueError(f"unit of {text!r}")


@dataclass(frozen=True)
class LaneRows:
    """One lane as the oracle sees it: per request its keys (in lane blocks), time, input tokens."""

    keys: list[list[Key]]
    times: list[int]
    input_len: list[int]
    block_size: int
    block_bytes: int


def naive_tier_sums(
    lane: LaneRows, served: Sequence[Sequence[int]], capacities: Sequence[Capacity]
) -> dict[str, object]:
    """The per-lane sums the tiers document holds, from per-request per-tier hits."""
    n_tiers = len(capacities)
    input_tokens = sum(lane.input_len)
    blocks = [sum(row[i] for row in served) for i in range(n_tiers)]
    tokens = [b * lane.block_size for b in blocks]

    def rate(x: int) -> float:
        return x / input_tokens if input_tokens else 0.0

    tiers = []
    running = 0
    for i in range(n_tiers):
        running += tokens[i]
        tiers.append(
            {
                "capacity_blocks": capacities[i],
                "hit_blocks": blocks[i],
                "hit_tokens": tokens[i],
                "hit_rate": rate(tokens[i]),
                "cumulative_hit_rate": rate(running),
                "bytes_loaded": 0 if i == 0 else blocks[i] * lane.block_bytes,
            }
        )
    return {
        "requests": len(lane.keys),
        "input_tokens": input_tokens,
        "hit_rate": rate(sum(tokens)),
        "tiers": tiers,
    }


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile of the values: the sorted value at rank ceil(q n) (1-based, at least 1)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(Fraction(str(q)) * len(ordered)))  # exact: 0.9 x 10 is 9, not 9.000...02
    return ordered[rank - 1]


def naive_prefill(
    lane: LaneRows, served: Sequence[Sequence[int]], constants: dict[str, object], tier_names: Sequence[str]
) -> dict[str, float | None]:
    """prefill_s of one lane, recomputed from the printed constants alone."""
    active = float(constants["active_params"])  # type: ignore[arg-type]
    layers = float(constants["layers"])  # type: ignore[arg-type]
    heads = float(constants["heads"])  # type: ignore[arg-type]
    head_dim = float(constants["head_dim"])  # type: ignore[arg-type]
    rate = float(constants["peak_flops"]) * float(constants["mfu"])  # type: ignore[arg-type]
    overlap = bool(constants["overlap"])
    links: dict[str, dict[str, float]] = constants["links"]  # type: ignore[assignment]

    def compute(new: float, cached: float) -> float:
        flops = 2 * active * new + 4 * layers * heads * head_dim * (new * cached + new * (new + 1) / 2)
        return flops / rate

    estimate, uncached = [], []
    for length, row in zip(lane.input_len, served, strict=True):
        cached = sum(row) * lane.block_size
        new = length - cached
        c = compute(new, cached)
        loads = 0.0
        for i in range(1, len(tier_names)):
            if row[i] > 0:
                link = links[tier_names[i]]
                loads += row[i] * lane.block_bytes / link["bandwidth_bytes_per_s"] + link["latency_s"]
        estimate.append(max(c, loads) if overlap else c + loads)
        uncached.append(compute(length, 0))
    hours = ((max(lane.times) - min(lane.times)) / 1e9 if len(lane.times) > 1 else 0.0) / 3600
    total, total_uncached = sum(estimate), sum(uncached)
    return {
        "mean": total / len(estimate),
        "p50": nearest_rank(estimate, 0.5),
        "p90": nearest_rank(estimate, 0.9),
        "p99": nearest_rank(estimate, 0.99),
        "uncached_mean": total_uncached / len(uncached),
        "uncached_p50": nearest_rank(uncached, 0.5),
        "uncached_p90": nearest_rank(uncached, 0.9),
        "uncached_p99": nearest_rank(uncached, 0.99),
        "gpu_s_per_hour": total / hours if hours > 0 else None,
        "uncached_gpu_s_per_hour": total_uncached / hours if hours > 0 else None,
        "saved_share": 1 - total / total_uncached if total_uncached > 0 else None,
    }
