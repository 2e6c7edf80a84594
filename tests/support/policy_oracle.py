"""A deliberately naive fixed-capacity cache with pluggable eviction, for differential tests.

Policies: ``lru``, ``fifo``, ``lfu``, ``gdfs`` (GreedyDual-Frequency-Size, cost/size = 1) and ``wa``
(workload-aware: per-category reuse rates fitted on the trace). Per request: the hits are the longest
prefix of its keys resident at request start; then its keys are committed from the last to the first,
each position one access that gets a global access number. A miss on a full cache first evicts the
policy's victim (which may be a key of this request committed a moment ago), then inserts.

No cleverness on purpose: plain dicts, the victim is found by scanning every resident block, every
fit rescans every observation. Nothing is shared with the C engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

POLICIES = ("lru", "fifo", "lfu", "gdfs", "wa")
DEFAULT_LIFE_NS = 60e9  # wa life when it is derived from no observation at all

Request = tuple[int, int, Sequence[int]]  # (timestamp_ns, category, keys)


@dataclass
class Block:
    """What the cache remembers about one resident key."""

    inserted: int  # access number of its insertion (fifo order)
    last: int  # access number of its latest access (lru order; every tie-break)
    count: int  # accesses since its insertion (lfu, gdfs)
    h: int  # gdfs: L + count as of its latest access
    timestamp_ns: int  # wa: timestamp of the request of its latest access
    category: int  # wa: category of the request of its latest access
    offset: int  # wa: its position in the keys of that request


@dataclass
class OracleResult:
    hits: list[int]  # prefix hits per request
    evictions: list[tuple[int, int]]  # (victim key, index of the request whose commit evicted it)
    wa_life_s: float | None  # wa: life used (or that would be used) in seconds; None otherwise
    wa_rates: dict[int, float] = field(default_factory=dict)  # wa: final rate per category, per second
    wa_rate_all: float | None = None  # wa: final rate over all categories, per second
    wa_fits: int = 0  # wa: fits performed
    resident: int = 0  # blocks resident at the end
    inserts: int = 0  # insertions, all requests together


def p90_life_ns(values: Sequence[int]) -> float:
    """Nearest-rank p90 of reuse gaps in ns (rank = ceil(0.9 n)); 60 s when there is none."""
    if not values:
        return DEFAULT_LIFE_NS
    ordered = sorted(values)
    rank = (9 * len(ordered) + 9) // 10
    return float(ordered[rank - 1])


def reuse_rate(values: Sequence[int]) -> float | None:
    """Observations per ns of reuse gap: count / sum, or None when there is nothing to fit."""
    total = sum(values)
    if not values or total <= 0:
        return None
    return float(len(values)) / float(total)


def wa_priority(rate: float, life_ns: float, age_ns: int) -> float:
    """log P(reuse within the life) - rate * age: the smaller, the less worth keeping."""
    reuse_within_life = -math.expm1(-rate * life_ns)
    head = math.log(reuse_within_life) if reuse_within_life != 0.0 else -math.inf
    return head - rate * float(age_ns)


class NaiveReuseModel:
    """The wa policy's trace-level model: reuse observations and the periodic per-category fits.

    It looks at every access of the trace, whatever the simulated cache holds.
    """

    def __init__(self, life_s: float | None, fit_window_s: float, refit_s: float) -> None:
        self.fixed_life_ns = None if life_s is None else life_s * 1e9
        self.window_ns = round(fit_window_s * 1e9)  # ties to even
        self.refit_ns = round(refit_s * 1e9)
        self.previous: dict[int, tuple[int, int, int]] = {}  # key -> (timestamp, category, request)
        self.observations: list[tuple[int, int, int]] = []  # (time, value, category of previous access)
        self.first_timestamp: int | None = None
        self.fits = 0
        self.life_ns: float | None = self.fixed_life_ns
        self.rates: dict[int, float] = {}  # per ns
        self.rate_all: float | None = None  # per ns

    def fit_until(self, now: int) -> None:
        """Performs every fit T_k = t0 + k * refit with T_k <= now not performed yet, in order."""
        if self.first_timestamp is None:
            self.first_timestamp = now
        while self.first_timestamp + (self.fits + 1) * self.refit_ns <= now:
            self.fit(self.first_timestamp + (self.fits + 1) * self.refit_ns)
            self.fits += 1

    def fit(self, at: int) -> None:
        if self.life_ns is None:  # the first fit fixes a derived life, before its rates apply
            self.life_ns = p90_life_ns([value for time, value, _ in self.observations if time < at])
        in_window = [(value, w) for time, value, w in self.observations if at - self.window_ns <= time < at]
        for w in sorted({w for _, w in in_window}):
            rate = reuse_rate([value for value, c in in_window if c == w])
            if rate is not None:
                self.rates[w] = rate
        rate = reuse_rate([value for value, _ in in_window])
        if rate is not None:
            self.rate_all = rate

    def observe(self, request: int, now: int, category: int, keys: Sequence[int]) -> None:
        """Records a reuse for each key whose previous access was by an earlier request."""
        for key in keys:
            previous = self.previous.get(key)
            if previous is not None and previous[2] < request:
                self.observations.append((now, now - previous[0], previous[1]))
            self.previous[key] = (now, category, request)

    def has_rates(self) -> bool:
        return bool(self.rates) or self.rate_all is not None

    def rate(self, category: int) -> float:
        rate = self.rates.get(category, self.rate_all)
        assert rate is not None  # a category rate is never set without the all-category rate
        return rate

    def reported_life_s(self) -> float:
        if self.life_ns is not None:
            return self.life_ns / 1e9
        return p90_life_ns([value for _, value, _ in self.observations]) / 1e9


class NaivePolicyCache:
    """One fixed-capacity cache under one policy, fed request by request."""

    def __init__(
        self,
        policy: str,
        capacity: int,
        *,
        wa_life_s: float | None = None,
        wa_fit_window_s: float = 3600.0,
        wa_refit_s: float = 600.0,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}")
        if capacity < 0:
            raise ValueError(f"negative capacity {capacity}")
        self.policy = policy
        self.capacity = capacity
        self.blocks: dict[int, Block] = {}
        self.clock = 0  # gdfs L
        self.accesses = 0
        self.requests = 0
        self.inserts = 0
        self.evictions: list[tuple[int, int]] = []
        self.model = NaiveReuseModel(wa_life_s, wa_fit_window_s, wa_refit_s) if policy == "wa" else None

    def request(self, timestamp_ns: int, category: int, keys: Sequence[int]) -> int:
        """Prefix hits of this request, then commits it."""
        request = self.requests
        self.requests += 1
        if self.model is not None:
            self.model.fit_until(timestamp_ns)
        hits = 0
        for key in keys:  # the snapshot at request start: nothing is touched yet
            if key not in self.blocks:
                break
            hits += 1
        if self.model is not None:
            self.model.observe(request, timestamp_ns, category, keys)
        for offset in reversed(range(len(keys))):
            self.accesses += 1
            self.access(keys[offset], offset, timestamp_ns, category, request)
        return hits

    def access(self, key: int, offset: int, now: int, category: int, request: int) -> None:
        block = self.blocks.get(key)
        if block is not None:
            block.last = self.accesses
            block.count += 1
            block.h = self.clock + block.count
            block.timestamp_ns, block.category, block.offset = now, category, offset
            return
        if self.capacity == 0:
            return
        if len(self.blocks) >= self.capacity:
            victim = self.victim(now)
            if self.policy == "gdfs":
                self.clock = self.blocks[victim].h
            del self.blocks[victim]
            self.evictions.append((victim, request))
        self.blocks[key] = Block(self.accesses, self.accesses, 1, self.clock + 1, now, category, offset)
        self.inserts += 1

    def victim(self, now: int) -> int:
        """Scans every resident block; ties go to the least recent access, then the smaller key."""
        rank: Callable[[int], tuple[float, ...]]
        candidates = list(self.blocks)
        blocks = self.blocks
        if self.policy == "fifo":
            rank = lambda k: (blocks[k].inserted, k)  # noqa: E731
        elif self.policy == "lfu":
            rank = lambda k: (blocks[k].count, blocks[k].last, k)  # noqa: E731
        elif self.policy == "gdfs":
            rank = lambda k: (blocks[k].h, blocks[k].last, k)  # noqa: E731
        elif self.policy == "wa" and self.model is not None and self.model.has_rates():
            candidates = self.wa_candidates()
            model, life_ns = self.model, self.model.life_ns
            assert life_ns is not None
            rank = lambda k: (  # noqa: E731
                wa_priority(model.rate(blocks[k].category), life_ns, now - blocks[k].timestamp_ns),
                -blocks[k].offset,
                blocks[k].last,
                k,
            )
        else:  # lru, and wa before any fit produced a rate
            rank = lambda k: (blocks[k].last, k)  # noqa: E731
        return min(candidates, key=rank)

    def wa_candidates(self) -> list[int]:
        """The least recently accessed resident block of each category (of its latest access)."""
        oldest: dict[int, int] = {}
        for key, block in self.blocks.items():
            w = block.category
            if w not in oldest or block.last < self.blocks[oldest[w]].last:
                oldest[w] = key
        return list(oldest.values())

    def result(self, hits: list[int]) -> OracleResult:
        model = self.model
        return OracleResult(
            hits=hits,
            evictions=list(self.evictions),
            wa_life_s=None if model is None else model.reported_life_s(),
            wa_rates={} if model is None else {w: r * 1e9 for w, r in sorted(model.rates.items())},
            wa_rate_all=None if model is None or model.rate_all is None else model.rate_all * 1e9,
            wa_fits=0 if model is None else model.fits,
            resident=len(self.blocks),
            inserts=self.inserts,
        )


def simulate(
    policy: str,
    capacity: int,
    requests: Sequence[Request],
    *,
    wa_life_s: float | None = None,
    wa_fit_window_s: float = 3600.0,
    wa_refit_s: float = 600.0,
) -> OracleResult:
    """Replays ``requests`` = [(timestamp_ns, category, keys), ...] in order through one cache."""
    cache = NaivePolicyCache(
        policy, capacity, wa_life_s=wa_life_s, wa_fit_window_s=wa_fit_window_s, wa_refit_s=wa_refit_s
    )
    hits = [cache.request(timestamp_ns, category, keys) for timestamp_ns, category, keys in requests]
    return cache.result(hits)
