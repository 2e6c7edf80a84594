"""A deliberately naive eviction-attribution window sizing, for differential tests of
``litehit window``: the cache is tests/policy_oracle.py's ``simulate`` (its eviction list says
which key each request's commit evicted); everything after it is plain Python on lists and dicts.
Nothing is shared with litehit.window or the C engine.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from policy_oracle import Request, simulate

NS = 10**9
TABLE_WINDOWS_S = [0.1, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400]


@dataclass
class NaiveMisses:
    requests: int = 0
    evicted: int = 0
    no_match: int = 0
    delays_ns: list[int] = field(default_factory=list)  # of the evicted misses, in request order


@dataclass
class NaiveLane:
    evictions: int
    peak_per_s: int
    peak_second: int
    all: NaiveMisses
    by_category: dict[int, NaiveMisses]


HIT, EVICTED, NO_MATCH = "hit", "evicted", "no_match"
Miss = tuple[str, int, int]  # (outcome, first uncached key or 0, time of its latest eviction or 0)


def naive_misses(evictions: Sequence[tuple[int, int]], hits: Sequence[int], requests: Sequence[Request]) -> list[Miss]:
    """Per request: the state of its first uncached block's key at its lookup (after the commits
    of every earlier request, before its own)."""
    evicted_by: dict[int, list[int]] = {}  # request index -> keys its commit evicted
    for key, request in evictions:
        evicted_by.setdefault(request, []).append(key)
    latest_eviction: dict[int, int] = {}  # key -> time of its latest eviction so far
    out: list[Miss] = []
    for index, (ts, _, keys) in enumerate(requests):
        if hits[index] == len(keys):
            out.append((HIT, 0, 0))
        elif keys[hits[index]] in latest_eviction:
            out.append((EVICTED, keys[hits[index]], latest_eviction[keys[hits[index]]]))
        else:
            out.append((NO_MATCH, keys[hits[index]], 0))
        for key in evicted_by.get(index, []):
            latest_eviction[key] = ts
    return out


def naive_peak(evictions: Sequence[tuple[int, int]], requests: Sequence[Request]) -> tuple[int, int]:
    """(most evictions in one aligned second floor(t / 1e9), the first such second)."""
    per_second = Counter(requests[request][0] // NS for _, request in evictions)
    peak = max(per_second.values(), default=0)
    return peak, min((s for s, c in per_second.items() if c == peak), default=0)


def naive_lane(policy: str, capacity: int, requests: Sequence[Request]) -> NaiveLane:
    """Outcome of every request's first uncached block, delays, and the peak eviction second."""
    sim = simulate(policy, capacity, requests)
    everything = NaiveMisses()
    by_category: dict[int, NaiveMisses] = {}
    misses = naive_misses(sim.evictions, sim.hits, requests)
    for (ts, category, _), (outcome, _, evicted_at) in zip(requests, misses, strict=True):
        for s in (everything, by_category.setdefault(category, NaiveMisses())):
            s.requests += 1
            if outcome == EVICTED:
                s.evicted += 1
                s.delays_ns.append(ts - evicted_at)
            elif outcome == NO_MATCH:
                s.no_match += 1
    return NaiveLane(len(sim.evictions), *naive_peak(sim.evictions, requests), everything, by_category)


def rank_value(delays_ns: list[int], fraction: str) -> int:
    """Nearest rank: the ceil(q n)-th smallest (q read as the decimal string given)."""
    ordered = sorted(delays_ns)
    return ordered[max(1, math.ceil(Fraction(fraction) * len(ordered))) - 1]


def naive_report(m: NaiveMisses, target: str) -> dict[str, object]:
    """The keys of a window.json miss report, computed naively."""
    n = len(m.delays_ns)
    delay: dict[str, object] = {"count": n, "p50": None, "p90": None, "p99": None, "p999": None, "max": None}
    coverage = []
    if n:
        for name, q in [("p50", "0.5"), ("p90", "0.9"), ("p99", "0.99"), ("p999", "0.999")]:
            delay[name] = rank_value(m.delays_ns, q) / NS
        delay["max"] = max(m.delays_ns) / NS
        windows = list(TABLE_WINDOWS_S)
        while True:
            if not windows:
                windows.append(coverage[-1]["window_s"] * 2)
            w = windows.pop(0)
            covered = sum(1 for d in m.delays_ns if d <= round(w * NS))
            coverage.append({"window_s": float(w), "coverage": covered / n})
            if covered == n:
                break
    return {
        "requests": m.requests,
        "outcomes": {"evicted": m.evicted, "no_match": m.no_match},
        "delay_s": delay,
        "coverage": coverage,
        "window_s": rank_value(m.delays_ns, target) / NS if n else 0.0,
    }


def naive_lane_window(
    lane: NaiveLane, names: dict[int, str], target: str, entry_bytes: float, load_factor: float, bucket_s: float
) -> dict[str, object]:
    """The lane-level keys of window.json (besides lane identity), computed naively."""
    report = naive_report(lane.all, target)
    window_s = report["window_s"]
    assert isinstance(window_s, float)
    window_ns = rank_value(lane.all.delays_ns, target) if lane.all.delays_ns else 0
    return {
        "requests": lane.all.requests,
        "evictions": lane.evictions,
        "outcomes": report["outcomes"],
        "delay_s": report["delay_s"],
        "coverage": report["coverage"],
        "coverage_target": float(target),
        "window_s": window_s,
        "bucket_s": bucket_s,
        "buckets": math.ceil(Fraction(window_ns) / round(bucket_s * NS)),
        "extra_retention_s": bucket_s,
        "peak_evictions_per_s": lane.peak_per_s,
        "peak_second": lane.peak_second,
        "memory_bytes": lane.peak_per_s * window_s * entry_bytes / load_factor,
        "memory_mib": lane.peak_per_s * window_s * entry_bytes / load_factor / 2**20,
        "memory_bytes_15min": lane.peak_per_s * 900 * entry_bytes / load_factor,
        "memory_mib_15min": lane.peak_per_s * 900 * entry_bytes / load_factor / 2**20,
        "categories": {names[c]: naive_report(m, target) for c, m in sorted(lane.by_category.items())},
    }
