"""Fixed-capacity eviction policies: the naive oracle checked by hand, then core_c.PolicySim against it.

Sections:
1. the oracle (policy_oracle.py) on hand-made traces whose answers are worked out in the comments;
2. the oracle against the LRU oracle of oracle.py (an independent cross-check);
3. the C engine against the oracle, request by request (hits, evictions, stats);
4. the C engine's argument errors.
Requests are (timestamp_ns, category, keys); "s" after a time means seconds (x S ns).
"""

from __future__ import annotations

import itertools
import math
import os
import random
import signal
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from oracle import NaiveLru
from policy_oracle import POLICIES, OracleResult, Request, p90_life_ns, simulate, wa_priority

import core_c

S = 1_000_000_000  # ns per second
CAPACITIES = [0, 1, 2, 3, 5, 8, 13, 50]


def at(seconds: float, category: int, keys: Sequence[int]) -> Request:
    return (round(seconds * S), category, list(keys))


def untimed(*requests: Sequence[int]) -> list[Request]:
    """Requests of category 0, all at time 0."""
    return [(0, 0, list(keys)) for keys in requests]


# --- 1. the oracle by hand ---------------------------------------------------------------------------

LRU_OWN_KEYS = untimed([1, 2, 3], [1, 2], [3])


def test_lru_request_longer_than_the_capacity_evicts_its_own_keys() -> None:
    # C=2. r0 commits 3 (a1), 2 (a2), then 1 misses on a full cache: the LRU block is 3, committed a
    # moment ago by r0 itself. r1 = [1, 2]: both resident, 2 hits; touches 2 (a4), 1 (a5).
    # r2 = [3]: miss, evicts the LRU block 2.
    result = simulate("lru", 2, LRU_OWN_KEYS)
    assert result.hits == [0, 2, 0]
    assert result.evictions == [(3, 0), (2, 2)]
    assert (result.resident, result.inserts) == (2, 4)


@pytest.mark.parametrize("policy", POLICIES)
def test_capacity_zero_stores_nothing(policy: str) -> None:
    result = simulate(policy, 0, untimed([1, 2], [1, 2], [1], [1, 1]))
    assert result.hits == [0, 0, 0, 0]
    assert (result.evictions, result.resident, result.inserts) == ([], 0, 0)


DUPLICATE_KEY = untimed([6, 5, 5], [7])


@pytest.mark.parametrize(("policy", "victim"), [("lru", 5), ("fifo", 5), ("lfu", 6), ("gdfs", 6), ("wa", 5)])
def test_duplicate_key_in_a_request_is_two_accesses(policy: str, victim: int) -> None:
    # C=2. r0 = [6, 5, 5] commits position 2: insert 5 (a1, count 1); position 1: hit 5 (a2, count 2);
    # position 0: insert 6 (a3, count 1). r1 = [7] on a full cache:
    #   lru: 5 last accessed at a2, 6 at a3 -> 5.   fifo: 5 inserted at a1, 6 at a3 -> 5.
    #   lfu: 5 has count 2 (its second position is a hit), 6 count 1 -> 6 (one count per request would
    #   tie 1:1 and pick the least recent, 5).   gdfs: H(5) = 0 + 2, H(6) = 0 + 1 -> 6.
    #   wa: no fit yet -> lru.
    result = simulate(policy, 2, DUPLICATE_KEY)
    assert result.hits == [0, 0]
    assert result.evictions == [(victim, 1)]
    # C=1: [5, 5] inserts 5 then hits it (no eviction); a resident duplicate hits at each position.
    again = simulate(policy, 1, untimed([5, 5], [5, 5]))
    assert (again.hits, again.evictions, again.inserts) == ([0, 2], [], 1)


def test_fifo_ignores_hits() -> None:
    # C=2. r0 inserts 1, r1 inserts 2, r2 hits 1 (1 hit) but fifo order stays 1, 2.
    # r3 = [3]: fifo evicts 1 (earliest inserted; lru would evict 2). r4 = [1]: miss, evicts 2.
    trace = untimed([1], [2], [1], [3], [1])
    fifo = simulate("fifo", 2, trace)
    assert fifo.hits == [0, 0, 1, 0, 0]
    assert fifo.evictions == [(1, 3), (2, 4)]
    lru = simulate("lru", 2, trace)
    assert lru.hits == [0, 0, 1, 0, 1]
    assert lru.evictions == [(2, 3)]


def test_lfu_ties_go_to_the_least_recent_and_counts_are_forgotten() -> None:
    # C=2. r0..r3 = [1], [2], [1], [2]: counts 1:2 (last a3), 2:2 (last a4).
    # r4 = [3]: tie at count 2 -> least recent, 1. r5 = [4]: 3 has count 1 < 2 -> 3, although the most
    # recent. r6 = [1]: 1 comes back with count 1 (its count 2 was forgotten); victim 4 (count 1, a6)
    # over 2 (count 2). r7 = [5]: 1 (count 1, a7) is the only count-1 block -> 1.
    trace = untimed([1], [2], [1], [2], [3], [4], [1], [5])
    result = simulate("lfu", 2, trace)
    assert result.hits == [0, 0, 1, 1, 0, 0, 0, 0]
    assert result.evictions == [(1, 4), (3, 5), (4, 6), (1, 7)]


GDFS_CLOCK = untimed([1], [1], [2], [3], [4], [5], [4], [6], [7])


def test_gdfs_clock_rises_and_ages_out_a_frequent_block() -> None:
    # C=2, H = L + count at every access, L = H(victim) at every eviction. Access numbers a1..a9.
    # r0 [1]: H1 = 0+1 = 1.       r1 [1]: hit, count 2, H1 = 0+2 = 2.      r2 [2]: H2 = 0+1 = 1.
    # r3 [3]: min H is 2 (1)      -> evict 2, L = 1; H3 = 1+1 = 2.
    # r4 [4]: H1 = 2 (a2) ties H3 = 2 (a4) -> least recent, evict 1, L = 2; H4 = 2+1 = 3.
    #         (lfu would keep 1, count 2, and evict 3.)
    # r5 [5]: H3 = 2 < H4 = 3     -> evict 3, L = 2; H5 = 3.
    # r6 [4]: hit, count 2, H4 = L + 2 = 4.
    # r7 [6]: H5 = 3 < H4 = 4     -> evict 5, L = 3; H6 = 4.
    # r8 [7]: H4 = 4 (a7) ties H6 = 4 (a8) -> evict 4 (count 2) for a newcomer, L = 4.
    result = simulate("gdfs", 2, GDFS_CLOCK)
    assert result.hits == [0, 1, 0, 0, 0, 0, 1, 0, 0]
    assert result.evictions == [(2, 3), (1, 4), (3, 5), (5, 7), (4, 8)]
    lfu = simulate("lfu", 2, GDFS_CLOCK)
    assert lfu.evictions[:2] == [(2, 3), (3, 4)]


# wa: fits every 10 s from t0 = 0; the first fit is at T1 = 10 s.
WA_PARAMS: dict[str, Any] = {"wa_fit_window_s": 100.0, "wa_refit_s": 10.0}

WA_TWO_RATES = [
    at(0, 1, [2]),
    at(4, 1, [2]),  # reuse of 2 after 4 s, observed for category 1
    at(5, 0, [1]),
    at(6, 0, [1]),  # reuse of 1 after 1 s, observed for category 0
    at(10, 0, [3]),  # fit at T1 = 10 s first: r0 = 1/s, r1 = 0.25/s, r_all = 2 / 5 s
]


def test_wa_evicts_by_category_rate_not_by_recency() -> None:
    # C=2, life 10 s. At r4 (t = 10 s) the candidates are 1 (category 0, age 4 s) and 2 (category 1,
    # age 6 s). Priorities log(1 - exp(-r life)) - r age:
    #   1: log(1 - e^-10) - 1 * 4      = -4.0000454
    #   2: log(1 - e^-2.5) - 0.25 * 6  = -0.0857 - 1.5 = -1.5857
    # so 1 goes although 2 is older: a category-0 block idle for 4 reuse gaps is unlikely to return.
    result = simulate("wa", 2, WA_TWO_RATES, wa_life_s=10.0, **WA_PARAMS)
    assert result.evictions == [(1, 4)]
    assert simulate("lru", 2, WA_TWO_RATES).evictions == [(2, 4)]
    assert result.wa_fits == 1
    assert result.wa_rates == {0: pytest.approx(1.0, rel=1e-15), 1: pytest.approx(0.25, rel=1e-15)}
    assert result.wa_rate_all == pytest.approx(0.4, rel=1e-15)
    assert result.wa_life_s == 10.0
    assert wa_priority(1e-9, 10e9, 4 * S) == pytest.approx(math.log(-math.expm1(-10.0)) - 4.0, rel=1e-15)


WA_EQUAL_AGE = [
    at(0, 0, [1]),
    at(1, 0, [1]),  # category 0: one reuse of 1 s
    at(1, 1, [2]),
    at(2, 1, [2]),  # category 1: one reuse of 1 s: both categories get the same rate 1/s at T1 = 10 s
    at(10, 1, [20]),
    at(10, 0, [30, 31]),
    at(10, 0, [30, 31]),
]


def test_wa_breaks_equal_priorities_by_the_deeper_offset() -> None:
    # C=2, life 10 s, one rate for everyone, so the priority only depends on the age.
    # r4 (t=10 s) [20]: candidates 1 (age 9 s) and 2 (age 8 s) -> evict 1 (the older).
    # r5 (t=10 s, category 0) [30, 31] commits 31 first (offset 1): only category 1 is resident (2 and
    #   20), its one candidate is its least recent block, 2 -> evict 2.
    #   Then 30 (offset 0): candidates 20 (category 1, age 0, offset 0) and 31 (category 0, age 0,
    #   offset 1): equal priorities, -offset 0 vs -1 -> evict 31, the block committed a moment ago.
    #   lru would evict 20 instead.
    # r6 [30, 31]: 30 resident, 31 not -> 1 hit; 31 evicts 20 (category 1, age 0, offset 0) against
    #   30 (category 0, age 0, offset 0): equal priority and offset -> the least recent, 20.
    result = simulate("wa", 2, WA_EQUAL_AGE, wa_life_s=10.0, **WA_PARAMS)
    assert result.wa_rates == {0: 1.0, 1: 1.0}
    assert result.evictions == [(1, 4), (2, 5), (31, 5), (20, 6)]
    assert result.hits == [0, 1, 0, 1, 0, 0, 1]
    assert simulate("lru", 2, WA_EQUAL_AGE).evictions[2] == (20, 5)


def test_wa_before_the_first_fit_is_lru() -> None:
    rng = random.Random(7)
    # Every timestamp before T1 = t0 + 600 s (the default refit): no rate exists, the victim is the LRU.
    trace = [(i * S, rng.randrange(3), [rng.randrange(12) for _ in range(rng.randint(0, 4))]) for i in range(400)]
    for capacity in [1, 3, 5]:
        wa = simulate("wa", capacity, trace)
        lru = simulate("lru", capacity, trace)
        assert wa.wa_fits == 0 and wa.wa_rates == {} and wa.wa_rate_all is None
        assert (wa.hits, wa.evictions) == (lru.hits, lru.evictions)
        assert lru.evictions  # the comparison is not vacuous


def p90_trace(gaps_s: Sequence[int], end_s: float) -> list[Request]:
    """One request of keys 1..n at 0 s, then key k again at gaps_s[k-1] s (a reuse of that gap)."""
    trace = [at(0, 0, range(1, len(gaps_s) + 1))]
    trace += sorted(at(gap, 0, [k]) for k, gap in enumerate(gaps_s, start=1))
    return [*trace, at(end_s, 0, [])]


def test_wa_default_life_is_the_nearest_rank_p90_at_the_first_fit() -> None:
    # Gaps 1..10 s: rank ceil(0.9 * 10) = 9 -> 9 s. Gaps 1..11 s: rank ceil(9.9) = 10 -> 10 s
    # (a truncating rank would say 9 s). Refit 60 s: T1 = 60 s, reached by the last (empty) request.
    ten = simulate("wa", 50, p90_trace(range(1, 11), 60), wa_refit_s=60.0)
    assert (ten.wa_life_s, ten.wa_fits) == (9.0, 1)
    eleven = simulate("wa", 50, p90_trace([5, 1, 11, 2, 10, 3, 9, 4, 8, 7, 6], 60), wa_refit_s=60.0)
    assert eleven.wa_life_s == 10.0
    # Ending before T1: the life reported is the same p90, over every observation so far.
    assert simulate("wa", 50, p90_trace(range(1, 11), 59), wa_refit_s=60.0).wa_life_s == 9.0
    # No observation at all: 60 s.
    assert simulate("wa", 50, untimed([1], [2], [3]), wa_refit_s=60.0).wa_life_s == 60.0
    assert p90_life_ns([]) == 60e9 and p90_life_ns([7]) == 7.0


def test_wa_life_is_fixed_at_the_first_fit() -> None:
    # Observations made after T1 = 60 s (a 100 s reuse at 100 s) do not move the life; fits go on.
    trace = [*p90_trace(range(1, 11), 60), at(100, 0, [60]), at(200, 0, [60])]
    result = simulate("wa", 50, trace, wa_refit_s=60.0)
    assert (result.wa_life_s, result.wa_fits) == (9.0, 3)  # fits at 60, 120, 180 s
    # A given life is used as is (reported as life_ns / 1e9).
    assert simulate("wa", 50, trace, wa_life_s=2.5, wa_refit_s=60.0).wa_life_s == 2.5


WA_CATEGORY_GAP = [at(0, 2, [1, 1, 2]), at(3, 0, [1, 2]), at(10, 0, []), at(11, 1, [3, 1, 2])]


def test_wa_observations_ignore_the_cache_and_repeats_within_a_request() -> None:
    # Capacity 0: nothing is ever resident, the model still sees every reuse.
    # r0 (category 2) [1, 1, 2]: the second 1 is the same request, not an observation.
    # r1 (category 0, t=3 s) [1, 2]: two reuses of 3 s, both observed for category 2 (the category of
    # the previous access). Fit at T1 = 10 s: r2 = 2 / 6 s; category 0 has no observation -> no rate.
    # r3 (t=11 s) observes 8 s reuses after the last fit: no rate changes.
    result = simulate("wa", 0, WA_CATEGORY_GAP, **WA_PARAMS)
    assert result.wa_rates == {2: pytest.approx(1 / 3, rel=1e-15)}
    assert result.wa_rate_all == pytest.approx(1 / 3, rel=1e-15)
    assert result.hits == [0, 0, 0, 0]


def test_wa_rates_keep_their_value_through_an_empty_window() -> None:
    # Window 10 s, refit 10 s. A reuse of 1 s at t=1 s: fit at 10 s -> r0 = 1/s. Fit at 20 s: window
    # [10, 20) is empty -> r0 stays 1/s. A reuse of key 2 after 20 s at t=25 s: fit at 30 s, window
    # [20, 30) -> r0 = 1 / 20 s = 0.05/s. A reuse of 0 s at 31 s (same timestamp, next request): fit at
    # 40 s sees a sum of 0 -> r0 stays 0.05/s.
    trace = [at(0, 0, [1]), at(1, 0, [1]), at(5, 0, [2]), at(25, 0, [2]), at(30, 0, []), at(31, 0, [3])]
    trace += [at(31, 0, [3]), at(40, 0, [])]
    params = {"wa_fit_window_s": 10.0, "wa_refit_s": 10.0}
    assert simulate("wa", 5, trace[:3], **params).wa_rates == {}
    assert simulate("wa", 5, trace[:4], **params).wa_rates == {0: 1.0}
    assert simulate("wa", 5, trace[:5], **params).wa_rates == {0: pytest.approx(0.05, rel=1e-15)}
    final = simulate("wa", 5, trace, **params)
    assert final.wa_rates == {0: pytest.approx(0.05, rel=1e-15)}
    assert final.wa_fits == 4


WA_WINDOW_EDGE = [at(0, 0, [1]), at(10, 0, [1]), at(12, 0, [3]), at(14, 0, [3]), at(30, 0, [])]


def test_wa_window_includes_its_lower_edge() -> None:
    # Window 20 s, refit 10 s. Reuses: 10 s observed at t=10 s, 2 s at t=14 s. The fit at 10 s runs
    # before r1, so it sees nothing. Fit at 20 s: window [0, 20) -> 2 / 12 s. Fit at 30 s: window
    # [10, 30) still holds the observation at exactly 10 s -> 2 / 12 s (an open edge would say 1 / 2 s).
    result = simulate("wa", 2, WA_WINDOW_EDGE, wa_fit_window_s=20.0, wa_refit_s=10.0)
    assert result.wa_rates == {0: pytest.approx(1 / 6, rel=1e-15)}
    assert result.wa_fits == 3


def test_wa_with_one_category_is_lru() -> None:
    # One category: the only candidate is the least recent block of that category, i.e. the LRU block.
    # Distinct timestamps and one key per request (the brief's case), many fits (refit 5 s).
    rng = random.Random(11)
    trace: list[Request] = []
    t = 0
    for _ in range(600):
        t += rng.randrange(1, 3 * S)
        trace.append((t, 0, [int(rng.random() ** 2 * 30)]))
    for capacity in [1, 2, 5, 8]:
        wa = simulate("wa", capacity, trace, wa_refit_s=5.0, wa_fit_window_s=20.0)
        lru = simulate("lru", capacity, trace)
        assert wa.wa_fits > 50 and wa.wa_rates
        assert (wa.hits, wa.evictions) == (lru.hits, lru.evictions)


# --- 2. the oracle against oracle.py's LRU -------------------------------------------------------------


def random_trace(rng: random.Random, n: int, *, chains: bool, categories: int, t0: int = 0) -> list[Request]:
    """Skewed keys (small pools, so both reuse and evictions happen), 0-8 keys per request, duplicates
    now and then; with ``chains`` the keys are prefix chains [a, a*31+b, ...] (a prefix tree).
    Timestamps grow by random gaps, zero included (about 5 minutes for 600 requests)."""
    trace: list[Request] = []
    t = t0
    for _ in range(n):
        t += rng.choice([0, 0, rng.randrange(1, 1000), rng.randrange(S // 10, S), rng.randrange(S, 3 * S)])
        if rng.random() < 0.01:
            t += rng.randrange(10 * S, 40 * S)
        length = rng.randint(0, 8)
        if chains:
            key = int(rng.random() ** 2 * 8)
            keys = [key]
            for _ in range(length - 1):
                key = (key * 31 + rng.randrange(3)) % (1 << 62)
                keys.append(key)
            keys = keys[:length]
        else:
            keys = [int(rng.random() ** 2 * 40) - 5 for _ in range(length)]  # some negative keys
            if keys and rng.random() < 0.1:
                keys.insert(rng.randrange(len(keys)), rng.choice(keys))
        trace.append((t, rng.randrange(categories), keys))
    return trace


@pytest.mark.parametrize("seed", range(6))
def test_oracle_lru_matches_naive_lru(seed: int) -> None:
    rng = random.Random(seed)
    trace = random_trace(rng, 500, chains=seed % 2 == 1, categories=2)
    for capacity in CAPACITIES:
        naive = NaiveLru(capacity)
        assert simulate("lru", capacity, trace).hits == [naive.request(keys) for _, _, keys in trace]


# --- 3. core_c.PolicySim against the oracle -------------------------------------------------------------


# Name -> (policy, wa parameters). Random traces span minutes: refit 5 s and a 20 s window make many fits.
RANDOM_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "lru": ("lru", {}),
    "fifo": ("fifo", {}),
    "lfu": ("lfu", {}),
    "gdfs": ("gdfs", {}),
    "wa-life-8s": ("wa", {"wa_life_s": 8.0, "wa_fit_window_s": 20.0, "wa_refit_s": 5.0}),
    "wa-derived-life": ("wa", {"wa_fit_window_s": 20.0, "wa_refit_s": 5.0}),
    "wa-defaults": ("wa", {}),  # refit 600 s: one fit, if any, near the end
}
HAND_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    **{name: RANDOM_CONFIGS[name] for name in ["lru", "fifo", "lfu", "gdfs"]},
    "wa-life-10s": ("wa", {"wa_life_s": 10.0, **WA_PARAMS}),
    "wa-derived-life": ("wa", dict(WA_PARAMS)),
    "wa-refit-60s": ("wa", {"wa_refit_s": 60.0}),
    "wa-window-20s": ("wa", {"wa_life_s": 10.0, "wa_fit_window_s": 20.0, "wa_refit_s": 10.0}),
}

HAND_TRACES: dict[str, list[Request]] = {
    "lru-own-keys": LRU_OWN_KEYS,
    "duplicate-key": DUPLICATE_KEY,
    "duplicate-resident": untimed([5, 5], [5, 5], [5, 6, 5], [6, 6, 6]),
    "fifo-hits": untimed([1], [2], [1], [3], [1]),
    "lfu-ties": untimed([1], [2], [1], [2], [3], [4], [1], [5]),
    "gdfs-clock": GDFS_CLOCK,
    "wa-two-rates": WA_TWO_RATES,
    "wa-equal-age": WA_EQUAL_AGE,
    "wa-window-edge": WA_WINDOW_EDGE,
    "wa-category-gap": WA_CATEGORY_GAP,
    "wa-p90": [*p90_trace(range(1, 11), 60), at(61, 0, [1, 2, 3]), at(100, 0, [60]), at(200, 0, [4])],
    "wa-zero-gaps": [at(0, 0, [1, 2]), at(0, 1, [1, 2]), at(0, 0, [3]), at(10, 1, [4, 5]), at(60, 0, [6, 1])],
    "empty-requests": [at(0, 0, []), at(1, 1, [1, 2]), at(1, 0, []), at(2, 2, [2, 1]), at(70, 0, [])],
    "negative-keys": untimed([-1, -2, -3], [-1, 0], [-(2**63), 2**63 - 1], [-2, -(2**63)]),
}


def as_batch(requests: Sequence[Request]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat arrays of process_batch: keys, offsets (n + 1), timestamps (n), categories (n)."""
    lengths = [len(keys) for _, _, keys in requests]
    keys = np.array([key for _, _, ks in requests for key in ks], dtype=np.int64)
    offsets = np.zeros(len(requests) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths, dtype=np.int64)
    timestamps = np.array([t for t, _, _ in requests], dtype=np.int64)
    categories = np.array([c for _, c, _ in requests], dtype=np.int32)
    return keys, offsets, timestamps, categories


def run_engine(
    policy: str, capacity: int, requests: Sequence[Request], params: dict[str, Any], cuts: Sequence[int] = ()
) -> tuple[list[int], list[tuple[int, int]], Any]:
    """Hits, evictions (key, global request index) and final stats; ``cuts`` split the batches."""
    hits: list[int] = []
    evictions: list[tuple[int, int]] = []
    bounds = [0, *cuts, len(requests)]
    with core_c.PolicySim(policy, capacity, record_evictions=True, **params) as sim:
        for start, stop in itertools.pairwise(bounds):
            got = sim.process_batch(*as_batch(requests[start:stop]))
            assert got.dtype == np.int64 and got.shape == (stop - start,)
            hits += got.tolist()
            ev_keys, ev_requests = sim.evictions()
            evictions += [(int(k), start + int(r)) for k, r in zip(ev_keys, ev_requests, strict=True)]
        stats = sim.stats()
    return hits, evictions, stats


def first_difference(got: Sequence[Any], want: Sequence[Any]) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"first difference at {i}: engine {g}, oracle {w}"
    return f"lengths differ: engine {len(got)}, oracle {len(want)}"


def assert_engine_matches(
    policy: str, capacity: int, requests: Sequence[Request], params: dict[str, Any], cuts: Sequence[int] = ()
) -> OracleResult:
    want = simulate(policy, capacity, requests, **params)
    hits, evictions, stats = run_engine(policy, capacity, requests, params, cuts)
    assert hits == want.hits, "hits: " + first_difference(hits, want.hits)
    assert evictions == want.evictions, "evictions: " + first_difference(evictions, want.evictions)
    assert (stats.resident, stats.inserts, stats.evictions) == (want.resident, want.inserts, len(want.evictions))
    if policy != "wa":
        assert stats.wa_life_s is None
        return want
    assert stats.wa_life_s == pytest.approx(want.wa_life_s, rel=1e-12)
    assert stats.wa_fits == want.wa_fits
    rates = list(stats.wa_rates)
    for w in range(max([len(rates), *[c + 1 for c in want.wa_rates]])):
        got = rates[w] if w < len(rates) else 0.0
        assert got == pytest.approx(want.wa_rates.get(w, 0.0), rel=1e-12), f"rate of category {w}"
    assert stats.wa_rate_all == pytest.approx(want.wa_rate_all or 0.0, rel=1e-12)
    return want


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("trace", list(HAND_TRACES))
@pytest.mark.parametrize("config", list(HAND_CONFIGS))
def test_engine_matches_oracle_on_hand_traces(config: str, trace: str, capacity: int) -> None:
    policy, params = HAND_CONFIGS[config]
    assert_engine_matches(policy, capacity, HAND_TRACES[trace], params)


@pytest.mark.parametrize(
    ("life_s", "refit_s"),
    [
        (5e-324, 10.0),  # r * life underflows to 0: log(0) -> -inf for everyone, then -offset, recency
        (1e300, 10.0),  # P(reuse within the life) = 1: priority = -rate * age
        (10.0, 2.5e-9),  # refit round(2.5) = 2 ns (ties to even): fits at t0 + 2, 4, 6 ... ns
    ],
)
def test_engine_matches_oracle_on_wa_edge_parameters(life_s: float, refit_s: float) -> None:
    params = {"wa_life_s": life_s, "wa_fit_window_s": 100.0, "wa_refit_s": refit_s}
    if refit_s < 1e-6:  # a trace in ns around the fit times
        trace: list[Request] = [(t, t % 2, [t % 3, t % 5]) for t in range(13)]
    else:
        trace = [*WA_EQUAL_AGE, *[at(15, c, [c, 40 + c, 41 + c]) for c in range(3)], at(30, 1, [1, 2, 3])]
    for capacity in [1, 2, 3, 5]:
        want = assert_engine_matches("wa", capacity, trace, params)
        if refit_s < 1e-6:
            assert want.wa_fits == 6  # at 2, 4, ..., 12 ns (11 fits at 1 ns or 4 at 3 ns would differ)


RANDOM_TRACES = {  # name -> (seed, requests, chains, categories)
    "flat-600-2cat": (1, 600, False, 2),
    "chains-800-3cat": (2, 800, True, 3),
    "chains-1500-1cat": (3, 1500, True, 1),
    "flat-2000-3cat": (4, 2000, False, 3),
}


def random_named_trace(name: str) -> list[Request]:
    seed, n, chains, categories = RANDOM_TRACES[name]
    return random_trace(random.Random(seed), n, chains=chains, categories=categories, t0=1_700_000_000 * S)


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("trace", list(RANDOM_TRACES))
@pytest.mark.parametrize("config", list(RANDOM_CONFIGS))
def test_engine_matches_oracle_on_random_traces(config: str, trace: str, capacity: int) -> None:
    policy, params = RANDOM_CONFIGS[config]
    want = assert_engine_matches(policy, capacity, random_named_trace(trace), params)
    if capacity in (3, 13) and policy == "wa" and "wa_refit_s" in params:
        assert want.wa_fits > 50 and want.wa_rates  # the trace exercises the fitted victims


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("config", list(RANDOM_CONFIGS))
def test_engine_state_persists_across_batches(config: str, seed: int) -> None:
    policy, params = RANDOM_CONFIGS[config]
    rng = random.Random(100 + seed)
    requests = random_trace(rng, 700, chains=seed != 1, categories=1 + seed, t0=seed * S)
    cuts = sorted(rng.sample(range(1, len(requests)), rng.randint(1, 12)))
    capacity = rng.choice([2, 5, 13])
    assert_engine_matches(policy, capacity, requests, params, cuts)
    single, _, _ = run_engine(policy, capacity, requests, params)
    batched, _, _ = run_engine(policy, capacity, requests, params, [1, 2, 3, *cuts[1:]])
    assert batched == single


# --- 4. core_c.PolicySim argument errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("mru", 4), {}),
        (("LRU ", 4), {}),
        (("lru", -1), {}),
        (("wa", 4), {"wa_life_s": 0.0}),
        (("wa", 4), {"wa_life_s": -1.0}),
        (("wa", 4), {"wa_life_s": math.nan}),
        (("wa", 4), {"wa_fit_window_s": 0.0}),
        (("wa", 4), {"wa_fit_window_s": math.nan}),
        (("wa", 4), {"wa_refit_s": -600.0}),
        (("wa", 4), {"wa_refit_s": math.nan}),
    ],
)
def test_engine_rejects_bad_configuration(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        core_c.PolicySim(*args, **kwargs)


def test_engine_rejects_negative_categories() -> None:
    keys, offsets, timestamps, categories = as_batch(untimed([1], [2]))
    categories[1] = -1
    with core_c.PolicySim("wa", 4) as sim, pytest.raises(ValueError):
        sim.process_batch(keys, offsets, timestamps, categories)


def test_engine_rejects_decreasing_timestamps_within_and_across_batches() -> None:
    with core_c.PolicySim("lru", 4) as sim, pytest.raises(core_c.CoreInvalidArgument):
        sim.process_batch(*as_batch([at(2, 0, [1]), at(1, 0, [2])]))
    with core_c.PolicySim("wa", 4) as sim:
        sim.process_batch(*as_batch([at(5, 0, [1])]))
        with pytest.raises(core_c.CoreInvalidArgument):
            sim.process_batch(*as_batch([at(4, 0, [1])]))


@pytest.mark.parametrize("broken", ["decreasing-offsets", "last-offset", "short-timestamps"])
def test_engine_rejects_malformed_batches(broken: str) -> None:
    keys, offsets, timestamps, categories = as_batch(untimed([1, 2], [3], [4, 5]))
    if broken == "decreasing-offsets":
        offsets[1], offsets[2] = offsets[2], offsets[1]
    elif broken == "last-offset":
        offsets[-1] += 1
    else:
        timestamps = timestamps[:-1]
    with core_c.PolicySim("lru", 4) as sim, pytest.raises(ValueError):  # CoreInvalidArgument is a ValueError
        sim.process_batch(keys, offsets, timestamps, categories)


def test_wa_counts_refits_it_can_skip_instead_of_doing_them() -> None:
    """A 1 µs refit over 72 s of trace is 72 million fits; only the ones where the window's
    content changes are computed (before the skip this call ran for minutes)."""
    keys = np.array([1, 1, 1], dtype=np.int64)
    offsets = np.arange(4, dtype=np.int64)
    timestamps = np.array([0, 36 * 10**9, 72 * 10**9], dtype=np.int64)
    with core_c.PolicySim("wa", 1, wa_refit_s=1e-6, wa_fit_window_s=3600.0) as sim:
        assert sim.process_batch(keys, offsets, timestamps).tolist() == [0, 1, 1]
        stats = sim.stats()
    assert stats.wa_fits == 72_000_000
    assert stats.wa_rate_all == pytest.approx(1 / 36.0)  # one reuse of 36 s seen before the last request


def _wa_hits_over_many_keys() -> int:
    """A wa simulation whose tables pass 4 MiB (400,000 distinct keys, 100,000 slots), so that
    their pages are asked for ahead (core_c/include/lh_prefault.h)."""
    rng = np.random.default_rng(7)
    n_req, per = 16_000, 50
    keys = rng.integers(0, 400_000, n_req * per, dtype=np.int64)
    offsets = np.arange(0, n_req * per + 1, per, dtype=np.int64)
    ts = np.arange(n_req, dtype=np.int64) * 1_000_000
    cats = (np.arange(n_req) % 3).astype(np.int32)
    with core_c.PolicySim("wa", 100_000, wa_refit_s=0.5, wa_fit_window_s=2.0) as sim:
        return int(sim.process_batch(keys, offsets, ts, cats).sum())


def test_simulation_with_pages_asked_ahead_runs_in_a_forked_child() -> None:
    """The thread that faults pages in ahead is the parent's: a child of fork starts its own (its
    lock not left held), and the results are those of the parent, the thread's requests changing
    no memory."""
    want = _wa_hits_over_many_keys()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the same simulation, its hits to the parent
        code = 1
        try:
            os.close(read)
            os.write(write, str(_wa_hits_over_many_keys()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not finish its simulation within 60 s")
        time.sleep(0.02)
    got = os.read(read, 64)
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(got) == want == _wa_hits_over_many_keys()
