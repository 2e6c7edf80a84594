"""core_c.PolicySim's miss evidence (lh_sim_process_batch_misses) and peak eviction second,
request by request against the naive computation on the naive simulator (tests/window_oracle.py),
for every policy, across batch boundaries, with negative times; and its argument errors."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from policy_oracle import Request, simulate
from test_policy_sim import HAND_TRACES, RANDOM_CONFIGS, S, as_batch, random_trace
from window_oracle import EVICTED, HIT, NO_MATCH, Miss, naive_misses, naive_peak

import core_c
from core_c.policy import FULL_HIT, MISS_EVICTED, MISS_NO_MATCH

NAMES = {FULL_HIT: HIT, MISS_EVICTED: EVICTED, MISS_NO_MATCH: NO_MATCH}


def engine_misses(
    policy: str, capacity: int, requests: Sequence[Request], params: dict[str, Any], cuts: Sequence[int] = ()
) -> tuple[list[int], list[Miss], core_c.PolicySimStats]:
    """Hits and miss evidence per request, and the final stats; ``cuts`` split the batches (a
    batch between two cuts whose index is odd goes through plain process_batch: the evidence
    must still be kept)."""
    hits: list[int] = []
    misses: list[Miss] = []
    bounds = [0, *cuts, len(requests)]
    with core_c.PolicySim(policy, capacity, miss_evidence=True, **params) as sim:
        for part, (start, stop) in enumerate(itertools.pairwise(bounds)):
            batch = as_batch(requests[start:stop])
            if part % 2:
                hits += sim.process_batch(*batch).tolist()
                misses += [("?", 0, 0)] * (stop - start)  # no evidence asked here
                continue
            got = sim.process_batch_misses(*batch)
            hits += got.hits.tolist()
            misses += [
                (NAMES[int(o)], int(k), int(t))
                for o, k, t in zip(got.outcome, got.miss_key, got.evicted_at, strict=True)
            ]
        sim.check()
        stats = sim.stats()
    return hits, misses, stats


def assert_evidence_matches(
    policy: str, capacity: int, requests: Sequence[Request], params: dict[str, Any], cuts: Sequence[int] = ()
) -> list[Miss]:
    want = simulate(policy, capacity, requests, **params)
    hits, misses, stats = engine_misses(policy, capacity, requests, params, cuts)
    assert hits == want.hits
    expected = naive_misses(want.evictions, want.hits, requests)
    for i, (got, exp) in enumerate(zip(misses, expected, strict=True)):
        assert got[0] == "?" or got == exp, f"request {i}: engine {got}, naive {exp}"
    assert (stats.peak_evictions_per_s, stats.peak_second) == naive_peak(want.evictions, requests)
    assert stats.evicted_keys == len({key for key, _ in want.evictions})
    return expected


@pytest.mark.parametrize("capacity", [0, 1, 3, 13])
@pytest.mark.parametrize("trace", list(HAND_TRACES))
def test_evidence_on_hand_traces(trace: str, capacity: int) -> None:
    for policy, params in RANDOM_CONFIGS.values():
        assert_evidence_matches(policy, capacity, HAND_TRACES[trace], params)


@pytest.mark.parametrize("capacity", [1, 2, 5, 13])
@pytest.mark.parametrize("config", list(RANDOM_CONFIGS))
def test_evidence_on_random_traces(config: str, capacity: int) -> None:
    policy, params = RANDOM_CONFIGS[config]
    rng = random.Random(capacity)
    # negative times: seconds are floor(t / 1e9), so -0.5 s lies in second -1
    requests = random_trace(rng, 700, chains=capacity % 2 == 1, categories=3, t0=-90 * S)
    cuts = sorted(rng.sample(range(1, len(requests)), 5))
    expected = assert_evidence_matches(policy, capacity, requests, params, cuts)
    outcomes = {outcome for outcome, _, _ in expected}
    assert outcomes == {HIT, EVICTED, NO_MATCH}


def test_evidence_needs_the_flag_and_changes_nothing_without_it() -> None:
    batch = as_batch([(0, 0, [1, 2]), (S, 0, [3])])
    with core_c.PolicySim("lru", 1) as sim:
        with pytest.raises(core_c.CoreInvalidArgument, match="LH_SIM_MISS_EVIDENCE") as info:
            sim.process_batch_misses(*batch)
        assert info.value.index == 0
        assert sim.stats().requests == 0
        sim.process_batch(*batch)  # the peak second is kept without evidence too
        stats = sim.stats()
        assert (stats.peak_evictions_per_s, stats.peak_second, stats.evicted_keys) == (1, 0, 0)


def test_a_failing_request_writes_the_evidence_before_it() -> None:
    keys, offsets, ts, cats = as_batch([(5 * S, 0, [1]), (6 * S, 0, [2]), (4 * S, 0, [1])])
    with core_c.PolicySim("lru", 1, miss_evidence=True) as sim:
        with pytest.raises(core_c.CoreInvalidArgument) as info:
            sim.process_batch_misses(keys, offsets, ts, cats)
        assert info.value.index == 2
        got = sim.process_batch_misses(*as_batch([(7 * S, 0, [1])]))
        assert (got.outcome.tolist(), got.miss_key.tolist(), got.evicted_at.tolist()) == ([MISS_EVICTED], [1], [6 * S])
        assert np.array_equal(got.hits, [0])
