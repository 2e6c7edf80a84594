"""The profile's metrics from what a lane's ProfileRecorder kept and its per-request tallies:
vectorised numpy over the recorded arrays (no Python per block), exact integer arithmetic where
a threshold is compared (skew, capacity), nearest-rank quantiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from litehit.profile.result import CapacityPoint, Histogram, Lifespan, ReuseTime, Skew, WorkingSet
from litehit.quantiles import NS_PER_S, nearest_rank

__all__ = [
    "BINS_PER_DECADE",
    "SKEW_KEY_PERCENTS",
    "capacity_points",
    "ks_distance",
    "lifespan",
    "log_histogram",
    "reuse_time",
    "share_for",
    "shares_for",
    "skew",
    "working_set",
]

Int64Array = npt.NDArray[np.int64]

BINS_PER_DECADE = 5
SKEW_KEY_PERCENTS = (50, 77, 90)
CAPACITY_PERCENTS = (50, 90, 99)
_Q = {"p50_s": Fraction(1, 2), "p90_s": Fraction(9, 10), "p99_s": Fraction(99, 100)}


def _quantiles(sorted_ns: Int64Array) -> dict[str, float | None]:
    if len(sorted_ns) == 0:
        return dict.fromkeys(_Q)
    return {name: nearest_rank(sorted_ns, q) / NS_PER_S for name, q in _Q.items()}


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


def log_histogram(sorted_ns: Int64Array) -> Histogram:
    """Zeros apart, then BINS_PER_DECADE log-spaced bins (seconds) from the decade of the smallest
    positive value through the largest."""
    zero = int(np.searchsorted(sorted_ns, 0, side="right"))  # the values are >= 0
    positive = sorted_ns[zero:]  # a view
    if len(positive) == 0:
        return Histogram(zero=zero, edges_s=[], counts=[])
    lo = math.floor(math.log10(int(positive[0]) / NS_PER_S))
    hi = math.floor(math.log10(int(positive[-1]) / NS_PER_S)) + 1
    exponents = np.arange(lo * BINS_PER_DECADE, hi * BINS_PER_DECADE + 1) / BINS_PER_DECADE
    edges = 10.0**exponents
    # bin of each value: the last edge <= value (values are sorted; the last edge closes the last bin)
    cuts = np.searchsorted(positive, np.round(edges * NS_PER_S).astype(np.int64), side="left")
    cuts[0], cuts[-1] = 0, len(positive)
    return Histogram(zero=zero, edges_s=edges.tolist(), counts=np.diff(cuts).tolist())


def ks_distance(sorted_ns: Int64Array, rate: float) -> float:
    """sup |ECDF(x) - (1 - exp(-rate x))| over x (seconds). The ECDF jumps only at distinct values:
    at value v it goes from below(v)/n to upto(v)/n, so the distance is the larger of
    upto(v)/n - F(v) and F(v) - below(v)/n over the distinct values v."""
    n = len(sorted_ns)
    last = np.flatnonzero(sorted_ns[1:] != sorted_ns[:-1])  # the last index of each distinct value but the top one
    upto = np.append(last + 1, n)  # values <= v
    below = np.concatenate([[0], upto[:-1]])  # values < v
    fit = -np.expm1(-rate * (sorted_ns[upto - 1] / NS_PER_S))  # the exponential CDF at each distinct value
    return float(max(np.max(upto / n - fit), np.max(fit - below / n)))


def reuse_time(sorted_ns: Int64Array) -> ReuseTime:
    n = len(sorted_ns)
    mean_s = rate = ks = None
    if n:
        mean = Fraction(_exact_sum(sorted_ns), n * NS_PER_S)
        mean_s = float(mean)
        if mean > 0:
            rate = float(1 / mean)
            ks = ks_distance(sorted_ns, rate)
    return ReuseTime(
        count=n,
        mean_s=mean_s,
        max_s=int(sorted_ns[-1]) / NS_PER_S if n else None,
        exp_rate_per_s=rate,
        ks=ks,
        histogram=log_histogram(sorted_ns),
        **_quantiles(sorted_ns),
    )


def lifespan(sorted_ns: Int64Array, never_reused: int) -> Lifespan:
    keys = len(sorted_ns)
    return Lifespan(
        keys=keys,
        never_reused_share=never_reused / keys if keys else 0.0,
        histogram=log_histogram(sorted_ns),
        **_quantiles(sorted_ns),
    )


def shares_for(counts: Int64Array, percents: Sequence[int], population: int) -> list[float]:
    """For each percent: the smallest fraction of a population (sorted by count, descending)
    whose counts reach percent% of the total: k / population; 0 when the total is 0. counts may
    omit zeros. One sort for all the percents."""
    total = _exact_sum(counts)
    if total == 0 or population == 0:
        return [0.0] * len(percents)
    ordered = np.sort(counts)
    ordered = ordered[::-1]
    cumulative = np.cumsum(ordered)
    del ordered
    # 100 x cum >= percent x total, in integers
    return [(int(np.searchsorted(cumulative, -(-p * total // 100), side="left")) + 1) / population for p in percents]


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
    array of the hit blocks by threshold (see core_c.ProfileArrays)."""
    cumulative = np.cumsum(np.cumsum(threshold_slope))
    total = int(cumulative[-1]) if len(cumulative) else 0
    points = {}
    for p in CAPACITY_PERCENTS:
        blocks = int(np.searchsorted(cumulative, -(-p * total // 100), side="left")) if total else 0
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
