"""Differential tests: the C lane core against the naive multi-capacity LRU in oracle.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
from oracle import NaiveLru, NaiveTtlCounters

import core_c
from core_c import Lane

CAPACITIES = [0, 1, 2, 4, 9, None]


def contract_trace(rng: random.Random, n: int, branching: int, max_depth: int) -> list[list[int]]:
    """Random root-to-node paths in a tree; keys are prefix hashes of the path (the contract)."""
    requests = []
    for _ in range(n):
        raw = [rng.randrange(branching) for _ in range(rng.randint(1, max_depth))]
        requests.append([int(k) for k in core_c.prefix_hash(raw)])
    return requests


def project(curve: object, capacity: int | None) -> int:
    if capacity is None:
        return core_c.project_infinite(curve)  # type: ignore[arg-type]
    return core_c.project_blocks(curve, capacity)  # type: ignore[arg-type]


def run_both(
    requests: list[list[int]], capacities: list[int | None], times: list[int] | None = None, ttl: int = 0
) -> tuple[list[list[int]], list[list[int]]]:
    times = times or [0] * len(requests)
    oracles = [NaiveLru(c, ttl) for c in capacities]
    got, want = [], []
    with Lane(ttl_ns=ttl) as lane:
        for i, (keys, now) in enumerate(zip(requests, times, strict=True)):
            curve = lane.process(keys, now)
            got.append([project(curve, c) for c in capacities])
            want.append([o.request(keys, now) for o in oracles])
            if i % 97 == 0:
                lane.check()
        lane.check()
    return got, want


def test_matches_oracle_on_the_original_contract_trace_shape() -> None:
    """1500 requests, depth 1..10, raw values in {0,1,2}: exact per request and cumulatively."""
    got, want = run_both(contract_trace(random.Random(20260722), 1500, 3, 10), CAPACITIES)
    assert got == want
    assert np.sum(got, axis=0).tolist() == np.sum(want, axis=0).tolist()


@pytest.mark.parametrize("seed", range(40))
def test_matches_oracle_on_many_random_contract_traces(seed: int) -> None:
    rng = random.Random(seed)
    requests = contract_trace(rng, 150, rng.randint(2, 5), rng.randint(1, 12))
    got, want = run_both(requests, CAPACITIES)
    assert got == want


@pytest.mark.parametrize("seed", [20260713, *range(20)])
def test_projection_is_never_optimistic_on_non_contract_traces(seed: int) -> None:
    rng = random.Random(seed)
    requests = [[rng.randrange(17) for _ in range(rng.randint(0, 11))] for _ in range(1000)]
    got, want = run_both(requests, CAPACITIES)
    for g, w in zip(got, want, strict=True):
        assert all(a <= b for a, b in zip(g, w, strict=True))
        assert g[-1] == w[-1]  # infinite capacity stays exact


@pytest.mark.parametrize("ttl", [1, 17, 50, 120, 1000])
def test_ttl_matches_naive_joint_oracle(ttl: int) -> None:
    """Fixed TTL x any capacity from one replay; alive and expired counts match too."""
    rng = random.Random(20260730)
    capacities: list[int | None] = [1, 2, 3, 5, 8, 10**6]
    oracles = [NaiveLru(c, ttl) for c in capacities]
    counters = NaiveTtlCounters(ttl)
    now = 0
    with Lane(ttl_ns=ttl) as lane:
        for step in range(2000):
            now += rng.randint(0, 100)
            base, length = rng.randint(0, 12), rng.randint(1, 6)
            keys = [base * 100 + i for i in range(length)]
            curve = lane.process(keys, now)
            assert [project(curve, c) for c in capacities] == [o.request(keys, now) for o in oracles]
            counters.request(keys, now)
            assert lane.unique_blocks == counters.alive(), step
            assert lane.expired_blocks == counters.expired, step
        lane.check()


@pytest.mark.parametrize("seed", range(6))
def test_compaction_stress_keeps_results_and_bounds_positions(seed: int) -> None:
    """Long traces over few keys force many compactions; results stay exact."""
    rng = random.Random(seed)
    requests = contract_trace(rng, 6000, 2, 6)
    ttl = [0, 0, 0, 400, 2000, 50][seed]
    times = [i * 7 for i in range(len(requests))]
    capacities: list[int | None] = [1, 3, 8, 20, None]
    oracles = [NaiveLru(c, ttl) for c in capacities]
    with Lane(ttl_ns=ttl) as lane:
        for i, (keys, now) in enumerate(zip(requests, times, strict=True)):
            curve = lane.process(keys, now)
            assert [project(curve, c) for c in capacities] == [o.request(keys, now) for o in oracles]
            stats = lane.stats()
            assert stats.positions <= 4 * stats.unique_blocks + 4096 + len(keys)  # lh_lane.c COMPACT_FACTOR
            if i % 500 == 0:
                lane.check()
        assert lane.stats().compactions > 0


def test_keep_expired_does_not_change_curves() -> None:
    rng = random.Random(5)
    requests = contract_trace(rng, 3000, 3, 5)
    with Lane(ttl_ns=300) as plain, Lane(ttl_ns=300, keep_expired=True) as keep:
        for i, keys in enumerate(requests):
            assert plain.process(keys, i * 3) == keep.process(keys, i * 3)
        keep.check()
        assert keep.stats().tracked_keys >= plain.stats().tracked_keys
