"""One simulation of a sweep: a lane under one policy at one capacity, fed LaneWork in order,
and its tally. The CLI advances every run of a sweep chunk by chunk; a service task runs one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import core_c
from core_c.policy import MAX_CATEGORIES
from litehit.errors import ConfigError, ConfigIssue, ReplayError
from litehit.policies.options import SweepOptions, capacity_gib, lane_capacity_blocks
from litehit.policies.result import LruCheck, PolicyResult, WaLane
from litehit.replay.lanes import LaneRunner
from litehit.replay.plan import LaneSpec, LaneWork

__all__ = ["LruComparison", "PolicyRun", "RunKey", "sim_categories"]


def sim_categories(policy: str, work: LaneWork) -> npt.NDArray[np.int32] | None:
    """The categories a simulator needs: only WA looks at them (the others get None: one
    category), and WA keeps one list per category, at most core_c.policy.MAX_CATEGORIES."""
    if policy != "wa":
        return None
    if len(work.categories) and int(work.categories.max()) >= MAX_CATEGORIES:
        raise ConfigError(
            [
                ConfigIssue(
                    "policies",
                    "wa",
                    f"the wa policy handles at most {MAX_CATEGORIES:,} request categories and this trace has more "
                    "(standard rows: the category field; qwen rows: type x turn bucket)",
                )
            ]
        )
    return work.categories


@dataclass(frozen=True, slots=True)
class RunKey:
    lane: int
    policy: str
    capacity: float | str  # as the sweep options hold it: GiB, or "20000blocks" / "1000000tokens"


class PolicyRun:
    """A PolicySim and the integer sums the result is made of."""

    def __init__(self, key: RunKey, lane: LaneSpec, options: SweepOptions) -> None:
        self.key = key
        self.lane = lane
        blocks = lane_capacity_blocks(key.capacity, lane.block_bytes, lane.block_size)
        self.capacity_blocks = blocks
        self.sim = core_c.PolicySim(
            key.policy,
            blocks,
            wa_life_s=options.wa_life_seconds,
            wa_fit_window_s=options.wa_fit_window_seconds,
            wa_refit_s=options.wa_refit_seconds,
        )
        self.requests = self.hit_blocks = self.input_tokens = 0
        self.last_hits = np.empty(0, dtype=np.int64)

    def feed(self, work: LaneWork) -> None:
        """Simulates the next chunk of the lane's requests."""
        cats = sim_categories(self.key.policy, work)
        self.last_hits = self.sim.process_batch(work.keys, work.offsets, work.timestamps, cats)
        self.requests += work.requests
        self.hit_blocks += int(self.last_hits.sum())
        self.input_tokens += int(work.input_lens.sum())

    def result(self) -> PolicyResult:
        hit_tokens = self.hit_blocks * self.lane.block_size
        return PolicyResult(
            policy=self.key.policy,
            capacity_gb=capacity_gib(self.key.capacity, self.capacity_blocks, self.lane.block_bytes),
            capacity=self.key.capacity if isinstance(self.key.capacity, str) else None,
            capacity_blocks=self.capacity_blocks,
            requests=self.requests,
            hit_blocks=self.hit_blocks,
            hit_tokens=hit_tokens,
            input_tokens=self.input_tokens,
            hit_ratio=hit_tokens / self.input_tokens if self.input_tokens else 0.0,
            evictions=self.sim.stats().evictions,
        )

    def wa_state(self, category_names: list[str]) -> WaLane:
        """What WA learnt (call on a wa run only)."""
        stats = self.sim.stats()
        rates = {
            category_names[c]: rate for c, rate in enumerate(stats.wa_rates) if rate > 0 and c < len(category_names)
        }
        return WaLane(
            life_s=stats.wa_life_s or 0.0, fits=stats.wa_fits, rates_per_s=rates, rate_all_per_s=stats.wa_rate_all
        )

    def close(self) -> None:
        self.sim.close()


def _label(capacity: float | str) -> str:
    return capacity if isinstance(capacity, str) else f"{capacity:g} GiB"


class LruComparison:
    """Counts how LRU runs of one lane compare with the exact lane core's facts at their
    capacities, request by request; facts above the simulation mean a bug (ReplayError)."""

    def __init__(self, lane: LaneSpec, lru_runs: list[PolicyRun]) -> None:
        self.runner = LaneRunner(lane)
        self.runs = lru_runs
        self.comparisons = self.equal = self.lower = 0

    def check(self, work: LaneWork) -> None:
        facts = self.runner.run(work)
        projected = core_c.project_batch(facts.segments, facts.seg_offsets, [r.capacity_blocks for r in self.runs])
        for column, run in enumerate(self.runs):
            want = projected[:, column].astype(np.int64)
            higher = np.flatnonzero(want > run.last_hits)
            if len(higher):
                i = int(higher[0])
                raise ReplayError(
                    f"--verify-lru failed on lane {self.runner.spec.instance_id} at {_label(run.key.capacity)}: "
                    f"a request got {int(run.last_hits[i])} hit blocks in the LRU simulation but {int(want[i])} "
                    "from the exact facts"
                )
            self.comparisons += len(want)
            self.equal += int(np.count_nonzero(want == run.last_hits))
            self.lower += int(np.count_nonzero(want < run.last_hits))

    def tally(self) -> LruCheck:
        return LruCheck(comparisons=self.comparisons, equal=self.equal, facts_lower=self.lower)

    def close(self) -> None:
        self.runner.close()
