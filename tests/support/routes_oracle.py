"""A deliberately naive reference for ``litehit routes`` (the state-free routers), for differential
tests. Nothing is shared with the engine (no litehit, no core_c): everything is written from the
routing contract and from ORIGINAL_LITEHIT.md.

- the read rows of a standard trace (``request`` / ``get``; ``write`` rows are not requests), index
  i = 0, 1, 2, ... counting reads only;
- lane keys: optional rolling prefix hash (spec section 5, chain from 0, unsigned 64-bit arithmetic,
  result as int64), then re-blocking to the lane block size (every k-th chained key);
- the routers: round_robin (i mod N), random (SplitMix64 output i mod N), session (first RAW trace
  key mod 2^64 mod N; no keys: replica 0), prefix_hash (lane key of block k, or the last complete
  block if fewer, mod 2^64 mod N; no complete block: replica 0);
- a naive per-replica LRU of a fixed capacity in blocks (an OrderedDict, last = MRU): hits = the
  leading run of resident and alive keys on the snapshot before the request; then every key of the
  request is touched from the last to the first (the first block ends most recent), evicting the
  LRU entry while over capacity; TTL: alive iff now - last access < ttl_ns;
- the aggregate numbers of the routes document (hit rate, per-replica sums, the load imbalance
  ratios, the nearest-rank p99 over load windows);
- the state-dependent routers (``route_stateful``): least_loaded (the smallest prefill load over
  the sliding window, ties to the lowest index) and cache_aware (the longest resident prefix, ties
  to the smaller load then the lower index, unless its load exceeds (1 + threshold) x the mean, in
  exact arithmetic, when the least-loaded replica takes the request), each request then running
  on the chosen replica's LRU (no TTL). Loads are rescanned from every earlier request: O(n^2).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


# ---------------------------------------------------------------------------------------------
# keys


def to_int64(v: int) -> int:
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


def prefix_hash_next(prev: int, raw: int) -> int:
    h = prev & MASK
    v = raw & MASK
    rhs = (v + GOLDEN + ((h << 12) & MASK) + (h >> 32)) & MASK
    return to_int64(h ^ rhs)


def apply_prefix_hash(raw: Sequence[int]) -> list[int]:
    out, prev = [], 0
    for r in raw:
        prev = prefix_hash_next(prev, r)
        out.append(prev)
    return out


def lane_keys(raw: Sequence[int], trace_block: int, lane_block: int, prefix_hash: bool) -> list[int]:
    """The request's keys as the lane sees them (int64 values)."""
    assert lane_block % trace_block == 0
    chained = apply_prefix_hash(raw) if prefix_hash else [to_int64(k) for k in raw]
    k = lane_block // trace_block
    return chained[k - 1 :: k]


# ---------------------------------------------------------------------------------------------
# routers


def splitmix64(seed: int, i: int) -> int:
    """The i-th output (i from 0) of SplitMix64 seeded with seed."""
    z = (seed + (i + 1) * GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


@dataclass(frozen=True)
class Read:
    """One read row of the trace, in input order."""

    row: dict[str, Any]
    raw: list[int]  # the row's keys as written in the trace
    keys: list[int]  # lane keys
    ts: int
    input_len: int


def reads_of(rows: Sequence[dict[str, Any]], trace_block: int, lane_block: int, prefix_hash: bool) -> list[Read]:
    out = []
    for r in rows:
        if r["type"] not in ("request", "get"):
            continue
        raw = list(r["keys"])
        out.append(
            Read(r, raw, lane_keys(raw, trace_block, lane_block, prefix_hash), r["timestamp_ns"], r["input_len"])
        )
    return out


def assign(reads: Sequence[Read], router: str, n: int, *, seed: int = 0, prefix_blocks: int = 1) -> list[int]:
    """Per read, the replica the router sends it to."""
    out = []
    for i, rd in enumerate(reads):
        if router == "round_robin":
            out.append(i % n)
        elif router == "random":
            out.append(splitmix64(seed, i) % n)
        elif router == "session":
            out.append((rd.raw[0] & MASK) % n if rd.raw else 0)
        elif router == "prefix_hash":
            if not rd.keys:
                out.append(0)
            else:
                key = rd.keys[min(prefix_blocks, len(rd.keys)) - 1]
                out.append((key & MASK) % n)
        else:
            raise ValueError(router)
    return out


# ---------------------------------------------------------------------------------------------
# a naive fixed-capacity LRU per replica


class NaiveLru:
    def __init__(self, capacity: int | None, ttl_ns: int = 0) -> None:
        self.capacity = capacity
        self.ttl_ns = ttl_ns
        self.entries: OrderedDict[Hashable, int] = OrderedDict()  # key -> last access; last = MRU

    def resident_prefix(self, keys: Sequence[Hashable], now: int = 0) -> int:
        """The leading run of resident (and alive) keys; the cache is not changed."""
        hits = 0
        for key in keys:
            last = self.entries.get(key)
            if last is None or (self.ttl_ns and now - last >= self.ttl_ns):
                break
            hits += 1
        return hits

    def request(self, keys: Sequence[Hashable], now: int) -> int:
        hits = 0
        for key in keys:
            last = self.entries.get(key)
            if last is None or (self.ttl_ns and now - last >= self.ttl_ns):
                break
            hits += 1
        for key in reversed(keys):
            self.entries[key] = now
            self.entries.move_to_end(key)
            while self.capacity is not None and len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        return hits


def simulate(
    reads: Sequence[Read], replicas: Sequence[int], n: int, capacity: int | None, ttl_ns: int = 0
) -> list[int]:
    """Per read, its hit blocks on its replica's own LRU of the given capacity."""
    caches = [NaiveLru(capacity, ttl_ns) for _ in range(n)]
    return [caches[j].request(rd.keys, rd.ts) for rd, j in zip(reads, replicas, strict=True)]


# ---------------------------------------------------------------------------------------------
# the state-dependent routers: least_loaded, cache_aware


def _least_loaded(loads: Sequence[int]) -> int:
    best = 0
    for r in range(1, len(loads)):
        if loads[r] < loads[best]:
            best = r
    return best


def route_stateful(
    reads: Sequence[Read],
    router: str,
    n: int,
    capacity: int | None,
    block_size: int,
    window_ns: int,
    threshold: Fraction,
    ttl_ns: int = 0,
) -> tuple[list[int], list[int]]:
    """Per read (input order), the replica the router chooses and the request's hit blocks there.

    Every replica is its own LRU of ``capacity`` blocks (None: unbounded; ``ttl_ns`` as NaiveLru's:
    an expired block stays in the LRU order but is not a hit). The load of
    replica r when a request at time t arrives is the sum of the prefill tokens (input_len -
    hits x block_size) of the earlier requests routed to r at a time ts with t - window_ns < ts <= t.
    """
    if router not in ("least_loaded", "cache_aware"):
        raise ValueError(router)
    threshold = Fraction(threshold)
    caches = [NaiveLru(capacity, ttl_ns) for _ in range(n)]
    replicas: list[int] = []
    hits: list[int] = []
    for i, rd in enumerate(reads):
        t = rd.ts
        loads = [0] * n
        for j in range(i):  # every earlier request, rescanned
            ts = reads[j].ts
            if t - window_ns < ts <= t:
                loads[replicas[j]] += reads[j].input_len - hits[j] * block_size
        if router == "least_loaded":
            chosen = _least_loaded(loads)
        else:
            prefix = [caches[r].resident_prefix(rd.keys, t) for r in range(n)]
            candidate = 0
            for r in range(1, n):
                if (prefix[r], -loads[r]) > (prefix[candidate], -loads[candidate]):
                    candidate = r
            mean = Fraction(sum(loads), n)
            chosen = _least_loaded(loads) if loads[candidate] > (1 + threshold) * mean else candidate
        replicas.append(chosen)
        hits.append(caches[chosen].request(rd.keys, t))
    return replicas, hits


def nearest_rank(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(Fraction(str(q)) * len(ordered)))
    return ordered[rank - 1]


def _ratio(loads: Sequence[int], n: int) -> float:
    total = sum(loads)
    if total == 0:
        return 1.0
    return max(loads) / (total / n)


def summary(
    reads: Sequence[Read],
    replicas: Sequence[int],
    n: int,
    hits: Sequence[int],
    block_size: int,
    window_ns: int,
) -> dict[str, Any]:
    """The numbers of one (router, capacity) entry of the routes document."""
    per = [{"replica": j, "requests": 0, "input_tokens": 0, "hit_tokens": 0, "prefill_tokens": 0} for j in range(n)]
    windows: dict[int, list[int]] = {}
    for rd, j, h in zip(reads, replicas, hits, strict=True):
        ht = h * block_size
        p = per[j]
        p["requests"] += 1
        p["input_tokens"] += rd.input_len
        p["hit_tokens"] += ht
        p["prefill_tokens"] += rd.input_len - ht
        windows.setdefault(rd.ts // window_ns, [0] * n)[j] += rd.input_len - ht
    for p in per:
        p["hit_rate"] = p["hit_tokens"] / p["input_tokens"] if p["input_tokens"] else 0.0
    hit_tokens = sum(p["hit_tokens"] for p in per)
    input_tokens = sum(p["input_tokens"] for p in per)
    return {
        "hit_rate": hit_tokens / input_tokens if input_tokens else 0.0,
        "hit_tokens": hit_tokens,
        "input_tokens": input_tokens,
        "imbalance": {
            "max_over_mean": _ratio([p["prefill_tokens"] for p in per], n),
            "p99_over_mean": nearest_rank([_ratio(w, n) for w in windows.values()], 0.99),
        },
        "replicas": per,
    }


def hit_rate_at(reads: Sequence[Read], replicas: Sequence[int], n: int, capacity: int | None,
                block_size: int, ttl_ns: int = 0) -> Fraction:  # fmt: skip
    """The exact aggregate hit rate at a per-replica capacity."""
    hits = simulate(reads, replicas, n, capacity, ttl_ns)
    total = sum(rd.input_len for rd in reads)
    return Fraction(sum(hits) * block_size, total) if total else Fraction(0)
