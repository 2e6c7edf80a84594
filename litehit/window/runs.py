"""One lane of a sizing: a PolicySim with miss evidence fed LaneWork in order (per-block work in
C; per chunk only numpy), and the tally the lane's report is made of."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import core_c
from core_c.policy import FULL_HIT, MISS_EVICTED, MISS_NO_MATCH
from litehit.policies.options import capacity_gib, lane_capacity_blocks
from litehit.policies.runs import sim_categories
from litehit.replay.plan import LaneSpec, LaneWork
from litehit.window.delays import miss_report, window_ns
from litehit.window.memory import MemoryEstimate, ring_buckets
from litehit.window.options import WindowOptions
from litehit.window.result import LaneWindow, MissReport, Outcomes

__all__ = ["DelaySample", "WindowRun", "overall_report", "report_of"]

_OUTCOMES = 3  # FULL_HIT, MISS_EVICTED, MISS_NO_MATCH: the columns of the per-category counts
assert sorted((FULL_HIT, MISS_EVICTED, MISS_NO_MATCH)) == list(range(_OUTCOMES))

Int64Array = npt.NDArray[np.int64]


class DelaySample:
    """Per category: request outcome counts and the delays (ns) of the evicted misses."""

    def __init__(self) -> None:
        self.counts = np.zeros((0, _OUTCOMES), dtype=np.int64)  # [category, outcome]
        self._delays: list[Int64Array] = []
        self._categories: list[npt.NDArray[np.int32]] = []

    def add(self, categories: npt.NDArray[np.int32], outcome: npt.NDArray[np.int32], delays: Int64Array) -> None:
        """One chunk: every request's category and outcome, and the evicted misses' delays in order."""
        if len(categories):
            rows = int(categories.max()) + 1
            cells = categories.astype(np.int64) * _OUTCOMES + outcome
            counts = np.bincount(cells, minlength=rows * _OUTCOMES).reshape(rows, _OUTCOMES)
            self._grow(len(counts))
            self.counts[: len(counts)] += counts
        self._delays.append(delays)
        self._categories.append(categories[outcome == MISS_EVICTED])

    def extend(self, other: DelaySample) -> None:
        self._grow(len(other.counts))
        self.counts[: len(other.counts)] += other.counts
        self._delays.extend(other._delays)
        self._categories.extend(other._categories)

    def _grow(self, rows: int) -> None:
        if rows > len(self.counts):
            self.counts = np.vstack([self.counts, np.zeros((rows - len(self.counts), _OUTCOMES), dtype=np.int64)])

    def sorted_delays(self) -> tuple[Int64Array, Int64Array, npt.NDArray[np.int32]]:
        """All delays sorted, and the delays sorted by (category, delay) with their categories."""
        delays = np.concatenate([np.empty(0, dtype=np.int64), *self._delays])
        categories = np.concatenate([np.empty(0, dtype=np.int32), *self._categories])
        by_category = np.lexsort((delays, categories))
        return np.sort(delays), delays[by_category], categories[by_category]

    def outcomes(self, row: npt.NDArray[np.int64]) -> Outcomes:
        return Outcomes(evicted=int(row[MISS_EVICTED]), no_match=int(row[MISS_NO_MATCH]))


def report_of(
    sample: DelaySample, names: list[str], target: float
) -> tuple[MissReport, dict[str, MissReport], Int64Array]:
    """The report of all the sample's requests, one per category that had requests, and all the
    delays sorted."""
    everything, by_category, categories = sample.sorted_delays()
    total = sample.counts.sum(axis=0)
    overall = miss_report(int(total.sum()), sample.outcomes(total), everything, target)
    bounds = np.searchsorted(categories, np.arange(len(sample.counts) + 1))
    per_category = {
        names[c]: miss_report(int(row.sum()), sample.outcomes(row), by_category[bounds[c] : bounds[c + 1]], target)
        for c, row in enumerate(sample.counts)
        if row.sum()
    }
    return overall, per_category, everything


def overall_report(lanes: list[LaneWindow], delays: list[Int64Array], target: float) -> MissReport:
    """The report over every lane's misses together, from the lanes' outcome counts and their
    sorted delays (ns). The one merge of a sizing: the CLI and the service both call it."""
    everything = np.sort(np.concatenate([np.empty(0, dtype=np.int64), *delays]))
    outcomes = Outcomes(
        evicted=sum(lane.outcomes.evicted for lane in lanes),
        no_match=sum(lane.outcomes.no_match for lane in lanes),
    )
    return miss_report(sum(lane.requests for lane in lanes), outcomes, everything, target)


class WindowRun:
    """A lane at the sizing's capacity under its policy."""

    def __init__(self, lane: LaneSpec, options: WindowOptions) -> None:
        self.lane = lane
        self.options = options
        blocks = lane_capacity_blocks(options.capacity_gb, lane.block_bytes, lane.block_size)
        self.capacity_blocks = blocks
        self.sim = core_c.PolicySim(options.policy, blocks, miss_evidence=True)
        self.sample = DelaySample()

    def feed(self, work: LaneWork) -> None:
        """Simulates the next chunk of the lane's requests."""
        misses = self.sim.process_batch_misses(
            work.keys, work.offsets, work.timestamps, sim_categories(self.sim.policy, work)
        )
        evicted = misses.outcome == MISS_EVICTED
        self.sample.add(work.categories, misses.outcome, work.timestamps[evicted] - misses.evicted_at[evicted])

    def result(self, category_names: list[str]) -> LaneWindow:
        o = self.options
        overall, categories, delays = report_of(self.sample, category_names, o.coverage)
        stats = self.sim.stats()
        memory = MemoryEstimate(stats.peak_evictions_per_s, overall.window_s, o.entry_bytes, o.load_factor)
        return LaneWindow(
            lane=self.lane.instance_id,
            block_size=self.lane.block_size,
            block_bytes=self.lane.block_bytes,
            capacity_gb=capacity_gib(o.capacity_gb, self.capacity_blocks, self.lane.block_bytes),
            capacity=o.capacity_gb if isinstance(o.capacity_gb, str) else None,
            capacity_blocks=self.capacity_blocks,
            policy=o.policy,
            requests=overall.requests,
            evictions=stats.evictions,
            outcomes=overall.outcomes,
            delay_s=overall.delay_s,
            coverage=overall.coverage,
            coverage_target=o.coverage,
            window_s=overall.window_s,
            bucket_s=o.bucket_seconds,
            buckets=ring_buckets(window_ns(delays, o.coverage), o.bucket_seconds),
            extra_retention_s=o.bucket_seconds,
            peak_evictions_per_s=stats.peak_evictions_per_s,
            peak_second=stats.peak_second,
            memory_bytes=memory.bytes,
            memory_mib=memory.bytes / (1 << 20),
            memory_bytes_15min=memory.bytes_15min,
            memory_mib_15min=memory.bytes_15min / (1 << 20),
            categories=categories,
        )

    def close(self) -> None:
        self.sim.close()
