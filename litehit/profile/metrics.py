"""The profile's metrics from what a lane's ProfileRecorder kept and its per-request tallies:
vectorised numpy over the recorded arrays (no Python per block), exact integer arithmetic where
a threshold is compared (skew, capacity), nearest-rank quantiles."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

import core_c.profile
import core_c.project
from litehit.profile.result import CapacityPoint, Histogram, Lifespan, ReuseTime, Skew, WorkingSet
from litehit.quantiles import NS_PER_S

__all__ = [
    "BINS_PER_DECADE",
    "MAX_TALLIED",
    "SKEW_KEY_PERCENTS",
    "Tally",
    "capacity_points",
    "ks_distance",
    "lifespan",
    "log_histogram",
    "merge_tallies",
    "reuse_time",
    "share_for",
    "shares_for",
    "skew",
    "tally",
    "working_set",
]

Int64Array = npt.NDArray[np.int64]

BINS_PER_DECADE = 5
SKEW_KEY_PERCENTS = (50, 77, 90)
CAPACITY_PERCENTS = (50, 90, 99)
_Q = {"p50_s": Fraction(1, 2), "p90_s": Fraction(9, 10), "p99_s": Fraction(99, 100)}


@dataclass(frozen=True, slots=True)
class Tally:
    """Integer nanoseconds (reuse times, lifespans: never negative) as their distinct values in
    ascending order and how often each occurs, with the exact sum of them all: everything the
    quantiles, histograms and ECDF below read, at a size of the distinct values, not the values.
    ``upto[i]``: the values <= values[i]."""

    values: Int64Array
    counts: Int64Array
    total: int
    n: int = field(init=False)
    upto: Int64Array = field(init=False)

    def __post_init__(self) -> None:
        upto = np.cumsum(self.counts, dtype=np.int64)
        object.__setattr__(self, "upto", upto)
        object.__setattr__(self, "n", int(upto[-1]) if len(upto) else 0)


MAX_TALLIED = 1 << 18
"""Distinct values tallied through a hash map; beyond that the values are sorted instead."""


def tally(values: Int64Array, *, in_place: bool = False) -> Tally:
    """The Tally of int64 values: one pass through a hash map in C when they hold at most
    MAX_TALLIED distinct values (the usual case: trace clocks tick in milliseconds), else a sort
    (in place when ``in_place``: the caller's array is then reordered)."""
    found = core_c.profile.tally(values, MAX_TALLIED)
    if found is not None:
        return Tally(*found)
    total = _exact_sum(values)  # before a sort in place
    ordered = values if in_place else values.copy()
    ordered.sort()
    starts = _run_starts(ordered)
    return Tally(ordered[starts], np.diff(np.append(starts, len(ordered))), total)


def tally_runs(values: Int64Array, runs: npt.NDArray[np.uint32]) -> Tally:
    """The Tally of runs of equal values (runs[i] of values[i]: how the profile recorder keeps
    reuse times), through the C hash map whatever the number of distinct values (they are at
    most the runs, which are already in memory)."""
    found = core_c.profile.tally(values, len(values), weights=runs)
    if found is None:  # room for every value: only past 2^32 - 2 runs
        raise ValueError(f"{len(values):,} runs of values are more than a tally holds")
    return Tally(*found)


def _run_starts(ordered: Int64Array) -> Int64Array:
    """Where each run of equal values of a sorted, non-empty array starts."""
    return np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1])


def merge_tallies(tallies: Sequence[Tally]) -> Tally:
    """The Tally of the values of all the tallies together."""
    given = [t for t in tallies if t.n]
    if len(given) == 1:
        return given[0]
    if not given:
        return Tally(np.empty(0, np.int64), np.empty(0, np.int64), 0)
    values = np.concatenate([t.values for t in given])
    counts = np.concatenate([t.counts for t in given])
    order = np.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    starts = _run_starts(values)
    return Tally(values[starts], np.add.reduceat(counts, starts), sum(t.total for t in given))


def _nearest_rank(t: Tally, q: Fraction) -> int:
    """The q-quantile by nearest rank (litehit.quantiles.nearest_rank) of a tally's values: the
    smallest value with at least ceil(q x n) values <= it. n > 0."""
    rank = max(1, math.ceil(q * t.n))
    return int(t.values[int(np.searchsorted(t.upto, rank, side="left"))])


def _quantiles(t: Tally) -> dict[str, float | None]:
    if t.n == 0:
        return dict.fromkeys(_Q)
    return {name: _nearest_rank(t, q) / NS_PER_S for name, q in _Q.items()}


_SUM_CHUNK = 1 << 20


def _exact_sum(values: Int64Array) -> int:
    """The sum of non-negative int64 values as a Python int (no wrap-around): per chunk of 2^20
    values, the sums of the high and the low 32 bits fit in int64 (< 2^52); a chunk at a time,
    so no copy of the whole array is made."""
    high = low = 0
    for i in range(0, len(values), _SUM_CHUNK):
        chunk = values[i : i + _SUM_CHUNK]
        high += int(np.sum(chunk >> 32))
        low += int(np.sum(chunk & 0xFFFFFFFF))
    return (high << 32) + low


def log_histogram(t: Tally) -> Histogram:
    """Zeros apart, then BINS_PER_DECADE log-spaced bins (seconds) from the decade of the smallest
    positive value through the largest."""
    first = int(np.searchsorted(t.values, 0, side="right"))  # the distinct values <= 0 (they are >= 0)
    zero = int(t.upto[first - 1]) if first else 0
    positive = t.values[first:]  # a view
    if len(positive) == 0:
        return Histogram(zero=zero, edges_s=[], counts=[])
    lo = math.floor(math.log10(int(positive[0]) / NS_PER_S))
    hi = math.floor(math.log10(int(positive[-1]) / NS_PER_S)) + 1
    exponents = np.arange(lo * BINS_PER_DECADE, hi * BINS_PER_DECADE + 1) / BINS_PER_DECADE
    edges = 10.0**exponents
    # bin of each value: the last edge <= value (the last edge closes the last bin); cuts[i]: the
    # positive values below edge i
    below = np.concatenate([[0], t.upto[first:] - zero])  # below[j]: the values below positive[j]
    cuts = below[np.searchsorted(positive, np.round(edges * NS_PER_S).astype(np.int64), side="left")]
    cuts[0], cuts[-1] = 0, below[-1]
    return Histogram(zero=zero, edges_s=edges.tolist(), counts=np.diff(cuts).tolist())


def ks_distance(t: Tally, rate: float) -> float:
    """sup |ECDF(x) - (1 - exp(-rate x))| over x (seconds). The ECDF jumps only at distinct values:
    at value v it goes from below(v)/n to upto(v)/n, so the distance is the larger of
    upto(v)/n - F(v) and F(v) - below(v)/n over the distinct values v."""
    n = t.n
    below = t.upto - t.counts  # values < v
    fit = -np.expm1(-rate * (t.values / NS_PER_S))  # the exponential CDF at each distinct value
    return float(max(np.max(t.upto / n - fit), np.max(fit - below / n)))


def reuse_time(t: Tally) -> ReuseTime:
    n = t.n
    mean_s = rate = ks = None
    if n:
        mean = Fraction(t.total, n * NS_PER_S)
        mean_s = float(mean)
        if mean > 0:
            rate = float(1 / mean)
            ks = ks_distance(t, rate)
    return ReuseTime(
        count=n,
        mean_s=mean_s,
        max_s=int(t.values[-1]) / NS_PER_S if n else None,
        exp_rate_per_s=rate,
        ks=ks,
        histogram=log_histogram(t),
        **_quantiles(t),
    )


def lifespan(t: Tally, never_reused: int) -> Lifespan:
    keys = t.n
    return Lifespan(
        keys=keys,
        never_reused_share=never_reused / keys if keys else 0.0,
        histogram=log_histogram(t),
        **_quantiles(t),
    )


def shares_for(counts: Int64Array, percents: Sequence[int], population: int) -> list[float]:
    """For each percent (1 .. 100): the smallest fraction of a population (sorted by count,
    descending) whose counts reach percent% of the total: k / population; 0 when the total is 0.
    counts may omit zeros. From one tally of the counts: the keys of one count are taken
    together, so the work is in their distinct values, not a sort of every key."""
    t = tally(counts)
    total = t.total
    if total == 0 or population == 0:
        return [0.0] * len(percents)
    values, keys = t.values[::-1], t.counts[::-1]  # descending
    # the counts reached after each group of equal counts: every partial sum is at most the
    # total, so int64 holds them whenever it holds the total
    if total < 2**63:
        reached = np.cumsum(values * keys).tolist()
    else:
        reached = list(itertools.accumulate(int(v) * int(k) for v, k in zip(values, keys, strict=True)))
    taken = np.cumsum(keys).tolist()
    shares = []
    for p in percents:
        need = -(-p * total // 100)  # 100 x reached >= percent x total, in integers
        i = bisect.bisect_left(reached, need)  # the group where the need is met (need >= 1: a positive count)
        before, keys_before = (reached[i - 1], taken[i - 1]) if i else (0, 0)
        shares.append((keys_before + -(-(need - before) // int(values[i]))) / population)
    return shares


def share_for(counts: Int64Array, percent: int, population: int) -> float:
    """shares_for of one percent."""
    return shares_for(counts, [percent], population)[0]


def skew(key_reuses: Int64Array, keys: int, request_hits: Int64Array) -> Skew:
    """key_reuses: reuse counts of the keys (zeros may be omitted) out of `keys` keys;
    request_hits: hit blocks of every request (hit tokens are proportional in a lane)."""
    shares = dict(
        zip(
            (f"keys_for_{p}" for p in SKEW_KEY_PERCENTS),
            shares_for(key_reuses, SKEW_KEY_PERCENTS, keys),
            strict=True,
        )
    )
    return Skew(**shares, requests_for_90=share_for(request_hits, 90, len(request_hits)))


def capacity_points(threshold_slope: Int64Array, block_bytes: int) -> dict[str, CapacityPoint]:
    """For 50/90/99%: the smallest capacity C (blocks) whose hit blocks (those with threshold <= C)
    reach that share of all hit blocks; 0 when there is no hit. threshold_slope: the difference
    array of the hit blocks by threshold (see core_c.ProfileArrays), read by the projector."""
    caps, hits = core_c.project.curve_points(threshold_slope)  # where the hit blocks rise, and to what
    total = int(hits[-1])
    points = {}
    for p in CAPACITY_PERCENTS:
        blocks = int(caps[np.searchsorted(hits, -(-p * total // 100), side="left")]) if total else 0
        points[str(p)] = CapacityPoint(blocks=blocks, bytes=blocks * block_bytes)
    return points


def working_set(window: Int64Array, window_keys: Int64Array, window_ns: int) -> WorkingSet:
    """window/window_keys: the windows that saw a request (ascending) and their distinct keys;
    every other window between the first and the last counts as 0."""
    if len(window) == 0:
        return WorkingSet(window_s=window_ns / NS_PER_S, windows=0, max=0, p50=0, series=[])
    windows = int(window[-1]) - int(window[0]) + 1
    empty = windows - len(window)
    rank = -(-windows // 2)  # nearest rank of the median over all windows, the empty ones first
    p50 = 0 if rank <= empty else int(np.sort(window_keys)[rank - empty - 1])
    starts = window * window_ns / NS_PER_S
    return WorkingSet(
        window_s=window_ns / NS_PER_S,
        windows=windows,
        max=int(window_keys.max()),
        p50=p50,
        series=[(float(t), int(k)) for t, k in zip(starts.tolist(), window_keys.tolist(), strict=True)],
    )
