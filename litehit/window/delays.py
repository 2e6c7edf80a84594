"""Delay statistics of evicted misses, from sorted int64 nanosecond delays: nearest-rank
quantiles (litehit.quantiles), coverage over window lengths, and the smallest window reaching a
coverage target."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from litehit.quantiles import NS_PER_S, decimal, nearest_rank
from litehit.window.result import CoveragePoint, DelayStats, MissReport, Outcomes

__all__ = ["QUANTILES", "coverage_table", "delay_stats", "miss_report", "window_ns"]

QUANTILES = {"p50": Fraction(1, 2), "p90": Fraction(9, 10), "p99": Fraction(99, 100), "p999": Fraction(999, 1000)}
# windows of the coverage table (seconds); past a day they double until every delay is covered
COVERAGE_WINDOWS_S = (0.1, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)

SortedDelays = npt.NDArray[np.int64]


def delay_stats(sorted_ns: SortedDelays) -> DelayStats:
    if len(sorted_ns) == 0:
        return DelayStats(count=0, p50=None, p90=None, p99=None, p999=None, max=None)
    quantiles = {name: nearest_rank(sorted_ns, q) / NS_PER_S for name, q in QUANTILES.items()}
    return DelayStats(count=len(sorted_ns), max=int(sorted_ns[-1]) / NS_PER_S, **quantiles)


def coverage_table(sorted_ns: SortedDelays) -> list[CoveragePoint]:
    """Coverage at COVERAGE_WINDOWS_S (then doubling), up to the first window covering every delay."""
    n = len(sorted_ns)
    points: list[CoveragePoint] = []
    windows = iter(COVERAGE_WINDOWS_S)
    window: float = 0.0
    while n and (not points or points[-1].coverage < 1.0):
        window = next(windows, window * 2)
        covered = int(np.searchsorted(sorted_ns, round(window * NS_PER_S), side="right"))
        points.append(CoveragePoint(window_s=window, coverage=covered / n))
    return points


def window_ns(sorted_ns: SortedDelays, target: float) -> int:
    """The smallest window covering the target share of the delays: their nearest-rank quantile
    (0 when there is no delay)."""
    return nearest_rank(sorted_ns, decimal(target)) if len(sorted_ns) else 0


def miss_report(requests: int, outcomes: Outcomes, sorted_ns: SortedDelays, target: float) -> MissReport:
    """The report of one set of requests."""
    return MissReport(
        requests=requests,
        outcomes=outcomes,
        delay_s=delay_stats(sorted_ns),
        coverage=coverage_table(sorted_ns),
        window_s=window_ns(sorted_ns, target) / NS_PER_S,
    )
