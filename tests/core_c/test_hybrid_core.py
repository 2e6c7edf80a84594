"""The hybrid lane core (Full blocks + Linear states in one byte-weighted recency pool, the
original LiteHit's G5 semantics, HYBRID_G5.md) against the naive model in hybrid_oracle.py.

First the golden scenarios of HYBRID_G5.md section 5 (and the G4 TTL scenarios of
ORIGINAL_LITEHIT.md section 7, in the Full-only byte mode with unit charge), each run on the
oracle alone and then on the engine; then randomized differential tests: chain/trie-shaped traces
as in section 5.1, several (full, linear, step) configurations, with and without TTL, out-of-order
times, batches, and long traces that force compaction.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hybrid_oracle import NaiveHybrid, NaivePool, project_bytes, project_infinite, strictly_increasing

U64_MAX = 2**64 - 1
SEC = 1_000_000_000


def _engine() -> Any:
    import core_c.hybrid

    return core_c.hybrid


# ------------------------------------------------------------------------------------------------
# One interface over the oracle and the engine, so that every golden scenario runs on both.
# ------------------------------------------------------------------------------------------------
class OracleModel:
    def __init__(self, full: int, linear: int, step: int, ttl: int = 0) -> None:
        self.o = NaiveHybrid(full, linear, step, ttl)

    def process(self, keys: Sequence[int], now: int = 0) -> list[tuple[int, int]]:
        return self.o.process(keys, now)

    def advance(self, now: int) -> None:
        self.o.advance_time(now)

    def unique(self) -> int:
        return self.o.unique_blocks()

    def linear(self) -> int:
        return self.o.resident_linear()

    def bytes(self) -> int:
        return self.o.resident_bytes()

    def expired(self) -> int:
        return self.o.expired_full_blocks()

    def within(self, budget: int) -> int:
        return self.o.full_within_bytes(budget)

    def reset(self) -> None:
        self.o.reset()

    def close(self) -> None:
        pass


def norm(points: Any) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in points]


class EngineModel:
    def __init__(self, full: int, linear: int, step: int, ttl: int = 0) -> None:
        self.h = _engine().HybridLane(full_charge=full, linear_charge=linear, step_blocks=step, ttl_ns=ttl)

    def process(self, keys: Sequence[int], now: int = 0) -> list[tuple[int, int]]:
        pts = norm(self.h.process(list(keys), timestamp_ns=now))
        self.h.check()
        return pts

    def advance(self, now: int) -> None:
        self.h.advance_time(now)

    def unique(self) -> int:
        return int(self.h.stats().unique_blocks)

    def linear(self) -> int:
        return int(self.h.stats().resident_linear)

    def bytes(self) -> int:
        return int(self.h.stats().resident_bytes)

    def expired(self) -> int:
        return int(self.h.stats().expired_blocks)

    def within(self, budget: int) -> int:
        return int(self.h.full_within_bytes(budget))

    def reset(self) -> None:
        self.h.reset()

    def close(self) -> None:
        self.h.close()


Model = OracleModel | EngineModel
MakeModel = Callable[..., Model]


@pytest.fixture(params=["oracle", "engine"])
def make(request: pytest.FixtureRequest) -> Iterator[MakeModel]:
    kind = OracleModel if request.param == "oracle" else EngineModel
    if request.param == "engine":
        _engine()
    made: list[Model] = []

    def factory(full: int, linear: int, step: int, ttl: int = 0) -> Model:
        m = kind(full, linear, step, ttl)
        made.append(m)
        return m

    yield factory
    for m in made:
        m.close()


def P(points: Sequence[tuple[int, int]], capacity: int) -> int:
    return project_bytes(points, capacity)


# ------------------------------------------------------------------------------------------------
# Golden scenarios, HYBRID_G5.md section 5.1 (LiteHitLinearTest)
# ------------------------------------------------------------------------------------------------
def test_g1_empty_request_yields_empty_fact_and_no_state(make: MakeModel) -> None:
    m = make(8, 4, 2)
    assert m.process([]) == []
    assert (m.unique(), m.bytes(), m.linear()) == (0, 0, 0)


def test_g2_cold_request_misses_then_repeats_hit(make: MakeModel) -> None:
    m = make(8, 4, 2)
    assert m.process([10, 20, 30, 40, 50]) == []
    assert (m.unique(), m.bytes(), m.linear()) == (5, 52, 3)  # 5 x 8 + 3 x 4 (states at 1, 3, 4)
    pts = m.process([10, 20, 30, 40, 50])
    assert pts == [(20, 2), (40, 4), (52, 5)]
    assert project_infinite(pts) == 5
    assert P(pts, 0) == 0


def test_g3_recovery_requires_both_full_coverage_and_linear_state(make: MakeModel) -> None:
    m = make(10, 1, 1)
    assert m.process([1, 2, 3]) == []
    pts = m.process([1, 2, 3])
    assert pts == [(11, 1), (22, 2), (33, 3)]
    assert [P(pts, c) for c in (10, 11, 32, 33)] == [0, 1, 2, 3]


def test_g4_historical_forced_tail_linear_state_restores_longer_request(make: MakeModel) -> None:
    m = make(10, 1, 3)
    assert m.process([1, 2]) == []  # writes L2 as the tail
    pts = m.process([1, 2, 3, 4])
    assert pts == [(21, 2)]
    assert (P(pts, 20), P(pts, 21), project_infinite(pts)) == (0, 2, 2)


def test_g5_full_and_linear_state_expire_at_strict_ttl_boundary(make: MakeModel) -> None:
    m = make(10, 2, 2, ttl=100)
    assert m.process([1, 2], 0) == []
    assert m.process([1, 2], 99) == [(22, 2)]
    m.advance(199)
    assert (m.unique(), m.bytes(), m.expired()) == (0, 0, 2)  # only Full markers count
    assert m.process([1, 2], 199) == []
    assert (m.unique(), m.bytes()) == (2, 22)


def test_g6_historical_tail_linear_state_expires_independently(make: MakeModel) -> None:
    m = make(10, 1, 3, ttl=100)
    assert m.process([1, 2], 0) == []
    assert m.process([1, 2, 3, 4], 50) == [(21, 2)]
    assert m.process([1, 2], 100) == []  # L2 written at 0 is dead; F1/F2 (refreshed at 50) alive
    assert m.unique() == 4


def test_g9_reset_clears_everything(make: MakeModel) -> None:
    m = make(8, 4, 2)
    m.process([1, 2, 3, 4])
    assert m.bytes() > 0
    m.reset()
    assert (m.unique(), m.bytes(), m.linear()) == (0, 0, 0)
    assert m.process([1, 2]) == []


def test_g9_reset_clears_ttl_state(make: MakeModel) -> None:
    m = make(8, 4, 2, ttl=100)
    m.process([1, 2], 0)
    m.process([3], 500)
    assert m.expired() == 2
    m.reset()
    assert (m.unique(), m.bytes(), m.expired()) == (0, 0, 0)
    assert m.process([1, 2], 10) == []  # an earlier time than before the reset: a fresh clock
    assert m.process([1, 2], 20) == [(20, 2)]


# ------------------------------------------------------------------------------------------------
# 5.2 WeightedLruPoolTest: the pool alone (the oracle's pool; the engine exposes no pool)
# ------------------------------------------------------------------------------------------------
def test_g10_typed_keys_do_not_collide() -> None:
    pool = NaivePool(100, 30)
    pool.touch("F", 42)
    assert pool.resident("F", 42) and not pool.resident("L", 42)
    pool.touch("L", 42)
    assert (pool.full_count(), pool.linear_count(), pool.resident_bytes()) == (1, 1, 130)
    assert (pool.required("L", 42), pool.required("F", 42)) == (30, 130)


def test_g11_touch_moves_to_most_recent() -> None:
    pool = NaivePool(10, 4)
    for kind, key in (("F", 1), ("F", 2), ("L", 1)):
        pool.touch(kind, key)
    assert pool.required("F", 1) == 24
    pool.touch("F", 1)
    assert (pool.required("F", 1), pool.required("F", 2), pool.resident_bytes()) == (10, 24, 24)


def test_g12_non_resident_returns_false() -> None:
    pool = NaivePool(8, 2)
    assert pool.required("F", 7) is None
    pool.touch("F", 7)
    assert pool.required("F", 7) == 8
    pool.reset()
    assert pool.required("F", 7) is None and pool.resident_bytes() == 0


def test_g14_compaction_round_values() -> None:
    pool = NaivePool(3, 5)
    for _ in range(3000):
        for key in range(8):
            pool.touch("L" if key % 3 == 0 else "F", key)
    required = [pool.required("L" if key % 3 == 0 else "F", key) for key in range(8)]
    assert required == [30, 25, 22, 19, 14, 11, 8, 3]
    assert pool.resident_bytes() == 30
    assert [pool.full_within_bytes(b) for b in (0, 2, 3, 11, 13, 19, 29, 30, 10**9)] == [0, 0, 1, 2, 2, 3, 5, 5, 5]


# ------------------------------------------------------------------------------------------------
# 5.3 / 2.7: the Full-only byte mode
# ------------------------------------------------------------------------------------------------
def test_g15_default_fact_is_byte_step_even_for_full_only(make: MakeModel) -> None:
    m = make(8, 0, 0)
    assert m.process([1, 2, 3]) == []
    assert m.process([1, 2, 3]) == [(8, 1), (16, 2), (24, 3)]
    assert (m.unique(), m.bytes(), m.linear()) == (3, 24, 0)


def test_full_only_monotone_defense_on_repeated_keys(make: MakeModel) -> None:
    """Section 2.7: charge 8, [1,2] then [2,2,1,2] -> (16,1),(24,2),(32,3),(40,4)."""
    m = make(8, 0, 5)
    assert m.process([1, 2]) == []
    assert m.process([2, 2, 1, 2]) == [(16, 1), (24, 2), (32, 3), (40, 4)]


def test_full_only_ignores_step(make: MakeModel) -> None:
    for step in (0, 1, 3):
        m = make(5, 0, step)
        m.process([1, 2, 3, 4])
        assert m.process([1, 2, 3, 4]) == [(5, 1), (10, 2), (15, 3), (20, 4)]
        assert (m.bytes(), m.linear()) == (20, 0)


def test_step_zero_acts_as_one(make: MakeModel) -> None:
    m = make(10, 1, 0)
    m.process([1, 2, 3])
    assert m.process([1, 2, 3]) == [(11, 1), (22, 2), (33, 3)]
    assert m.linear() == 3


def test_g4_carried_over_unit_charge_chain_and_interleaving(make: MakeModel) -> None:
    """G4 ContiguousChainReplayIsOneSegment [[1,3]] and InterleavingChainBreaksSegments [[1,2],[4,1]]."""
    m = make(1, 0, 0)
    m.process([1, 2, 3])
    assert m.process([1, 2, 3]) == [(1, 1), (2, 2), (3, 3)]
    m = make(1, 0, 0)
    m.process([1, 2, 3])
    m.process([4])
    m.process([1, 2])
    assert m.process([1, 2, 3]) == [(1, 1), (2, 2), (4, 3)]


# ------------------------------------------------------------------------------------------------
# 5.4 TTL: the G4 scenarios (unit charge, Full-only) and #16
# ------------------------------------------------------------------------------------------------
def test_ttl_strict_deadline_boundary(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=2000)
    assert m.process([1, 2, 3], 1000) == []
    assert m.process([1, 2, 3], 2999) == [(1, 1), (2, 2), (3, 3)]
    assert m.process([1, 2, 3], 4999) == []  # age exactly 2000: dead
    assert project_infinite(m.process([1, 2, 3], 5000)) == 3  # the expired access refreshed it


def test_ttl_expired_block_stops_the_prefix_like_a_cold_one(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=2500)
    m.process([10, 11], 1000)
    assert m.process([10, 11, 12], 3000) == [(1, 1), (2, 2)]
    assert m.process([10, 11, 12], 5600) == []


def test_ttl_zero_is_pure_lru(make: MakeModel) -> None:
    m = make(1, 0, 0)
    m.process([1, 2, 3], 1000)
    assert m.process([1, 2, 3], 10**12) == [(1, 1), (2, 2), (3, 3)]
    m.advance(10**15)
    assert m.unique() == 3 and m.expired() == 0


def test_ttl_unique_blocks_exclude_expired(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=1000)
    m.process([1, 2, 3], 0)
    assert m.unique() == 3
    m.process([100], 5000)
    assert m.unique() == 1


def test_ttl_advance_time_refreshes_unique_count(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=1000)
    m.process([1, 2], 0)
    m.advance(999)
    assert m.unique() == 2
    m.advance(1000)
    assert m.unique() == 0
    m.process([1], 1000)
    assert m.unique() == 1


def test_ttl_counts_expired_blocks(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=1000)
    m.process([1, 2, 3], 0)
    assert m.expired() == 0
    m.process([1], 2000)
    assert m.expired() == 3
    m.advance(2500)
    assert m.expired() == 3
    m.advance(3000)
    assert m.expired() == 4  # the revived block 1 counts again
    m.reset()
    assert m.expired() == 0


def test_ttl_compaction_drops_expired_entries(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=1000)
    fresh = iter(range(10, 10**9))
    for _ in range(600):
        m.process([next(fresh) for _ in range(10)], 0)
    assert m.unique() == 6000
    m.process([1, 2, 3], 5000)
    assert (m.unique(), m.expired()) == (3, 6000)
    assert m.process([1000000], 5001) == []
    assert m.process([1, 2, 3], 5001) == [(2, 1), (3, 2), (4, 3)]  # G4's [[2,3]]


def test_ttl_compaction_collapses_empty_epochs(make: MakeModel) -> None:
    m = make(1, 0, 0, ttl=SEC)
    for t in range(1, 10001):
        m.process([7], t)
    assert m.unique() == 1
    assert m.process([7], 10001) == [(1, 1)]
    assert m.process([7], 10001 + SEC) == []
    if isinstance(m, EngineModel):
        s = m.h.stats()
        assert s.compactions > 0 and s.positions <= 2 * 1 + 4096 + 1
        assert s.epochs <= 4200


def test_g16_disabled_decorator_matches_bare_linear_core(make: MakeModel) -> None:
    requests = [[1, 2, 3], [1, 2], [1, 2, 3], [4, 5]]
    want_pts = [[], [(22, 2)], [(22, 2), (34, 3)], []]
    want_unique, want_bytes = [3, 3, 3, 5], [34, 34, 34, 56]
    for ttl in (0, 10**15):
        m = make(10, 2, 2, ttl=ttl)
        for i, keys in enumerate(requests):
            assert m.process(keys, 1000 + i * 10**6) == want_pts[i]
            assert (m.unique(), m.bytes()) == (want_unique[i], want_bytes[i])
        assert m.expired() == 0


# ------------------------------------------------------------------------------------------------
# 5.5 #19, #20 (the offline runner's numbers, through the core), 5.6
# ------------------------------------------------------------------------------------------------
def test_g19_hybrid_facts_of_the_runner_fixture(make: MakeModel) -> None:
    m = make(16384, 4096, 3)
    assert m.process([1, 2, 3, 4], 1000) == []
    pts = m.process([1, 2, 3, 4], 2000)
    assert pts == [(53248, 3), (73728, 4)]
    assert (P(pts, 53248), P(pts, 53247), P(pts, U64_MAX)) == (3, 0, 4)


def test_g20_linear_instance_honors_group_ttl(make: MakeModel) -> None:
    m = make(16384, 4096, 3, ttl=SEC)
    assert m.process([1], 1) == []
    assert m.process([1], 1 + SEC) == []  # age exactly 1 s
    assert m.process([1], 2 + SEC) == [(20480, 1)]  # F1 16384 newest, L1 16384 + 4096


def test_derived_envelope_pop(make: MakeModel) -> None:
    m = make(10, 1, 2)
    assert m.process([1]) == []  # writes L1 as the tail
    assert m.process([5, 6]) == []
    assert m.process([1, 2]) == [(32, 1)]  # F1 = 31, L1 = 32
    pts = m.process([1, 2])
    assert pts == [(21, 2)]  # (43, 1) of p = 0 is popped by p = 1's 21
    assert (P(pts, 20), P(pts, 21), P(pts, 43), project_infinite(pts)) == (0, 2, 2, 2)


# ------------------------------------------------------------------------------------------------
# Further scenarios derived from the spec (sections 2.4, 2.5 and 4)
# ------------------------------------------------------------------------------------------------
def test_duplicates_are_touched_per_occurrence(make: MakeModel) -> None:
    m = make(10, 1, 1)
    assert m.process([1, 1, 2]) == []
    # commit tail to head, L before F: L2 F2 L1 F1 L1 F1 -> MRU F1, L1, F2, L2
    assert (m.unique(), m.linear(), m.bytes()) == (2, 2, 22)
    assert m.process([1, 1, 2]) == [(11, 2), (22, 3)]  # p=0 (11,1) is popped by p=1 (11,2)
    assert [m.within(b) for b in (0, 9, 10, 11, 20, 21, 22, 10**6)] == [0, 0, 1, 1, 1, 2, 2, 2]


def test_ttl_watermark_is_monotone_when_time_goes_back(make: MakeModel) -> None:
    """[2]@200 sweeps F1 (ttl 100); at the earlier time 50 F1 stays dead although AgeNs(50, 0) < 100."""
    m = make(1, 0, 0, ttl=100)
    m.process([1], 0)
    m.process([2], 200)
    assert m.expired() == 1
    assert m.process([1], 50) == []
    assert m.process([2], 60) == [(2, 1)]  # F1 joined F2's epoch of 200 (the clamp of 50)
    assert (m.unique(), m.expired()) == (2, 1)


def test_ttl_epoch_time_is_clamped_to_the_last_epoch(make: MakeModel) -> None:
    """[2]@50 after [1]@100 joins the epoch of 100 (BeginCommit's clamp): F2 ages from 100."""
    m = make(1, 0, 0, ttl=100)
    m.process([1], 100)
    m.process([2], 50)
    assert m.process([2, 1], 155) == [(1, 1), (2, 2)]  # AgeNs(155, 50) >= 100 would have killed F2
    assert m.process([3], 254) == []
    assert m.expired() == 0  # [2,1]@155 opened the epoch of 155
    assert m.process([2, 1], 255) == []
    assert m.expired() == 2


def test_ttl_epoch_after_an_emptied_deque_forgets_the_popped_times(make: MakeModel) -> None:
    """[1]@1000 then AdvanceTime(2000) empties the deque: [2]@500 opens an epoch at 500."""
    m = make(1, 0, 0, ttl=100)
    m.process([1], 1000)
    m.advance(2000)
    assert m.process([2], 500) == []
    assert m.process([2], 650) == []  # age(650, 500) = 150
    assert m.expired() == 2


def test_ttl_epoch_after_an_emptied_deque_takes_the_callers_time(make: MakeModel) -> None:
    """AdvanceTime(1000) empties the deque; [2]@500 opens an epoch at 500 (no clamp to 1000)."""
    m = make(1, 0, 0, ttl=100)
    m.process([1], 0)
    m.advance(1000)
    assert (m.unique(), m.expired()) == (0, 1)
    assert m.process([2], 500) == []
    assert m.process([2], 550) == [(1, 1)]  # committed in the epoch of 550 = max(550, 500)
    assert m.process([2], 649) == [(1, 1)]
    assert m.process([2], 749) == []  # age(749, 649) = 100
    assert m.expired() == 2


def test_linear_states_and_expiry_count_only_full(make: MakeModel) -> None:
    m = make(4, 3, 1, ttl=10)
    m.process([1, 2, 3], 0)
    assert (m.unique(), m.linear(), m.bytes()) == (3, 3, 21)
    m.advance(10)
    assert (m.unique(), m.linear(), m.bytes(), m.expired()) == (0, 0, 0, 3)


def test_extreme_keys(make: MakeModel) -> None:
    keys = [0, -1, 2**63 - 1, -(2**63), 1]
    m = make(3, 2, 2)
    assert m.process(keys) == []
    assert m.process(keys) == [(8, 2), (16, 4), (21, 5)]
    assert m.unique() == 5


# ------------------------------------------------------------------------------------------------
# The oracle's two formulations agree (5.1 #7/#8 on the oracle alone)
# ------------------------------------------------------------------------------------------------
def scramble(counter: int) -> int:
    """A counter -> a well-spread signed 64-bit key."""
    v = (counter * 0x9E3779B97F4A7C15) % 2**64
    return v - 2**64 if v >= 2**63 else v


def chain_trace(
    rng: random.Random,
    n: int,
    *,
    max_fresh: int = 12,
    dup_rate: float = 0.0,
    scrambled: bool = False,
    recent: float = 0.0,
) -> list[list[int]]:
    """Section 5.1's generator: a prefix of an earlier request (2 times in 3) + 0..max_fresh fresh
    keys; empty requests happen. dup_rate: chance of breaking the contract with a repeated key;
    recent: chance that the earlier request is one of the last 16 (short reuse distances)."""
    history: list[list[int]] = []
    counter = 0
    out: list[list[int]] = []
    for _ in range(n):
        keys: list[int] = []
        if history and rng.randint(0, 2) != 0:
            low = max(0, len(history) - 16) if rng.random() < recent else 0
            base = history[rng.randint(low, len(history) - 1)]
            keys = list(base[: rng.randint(0, len(base))])
        for _ in range(rng.randint(0, max_fresh)):
            counter += 1
            keys.append(scramble(counter) if scrambled else counter)
        if keys:
            history.append(list(keys))
        if keys and rng.random() < dup_rate:
            how = rng.randint(0, 2)
            if how == 0:
                j = rng.randrange(len(keys))
                keys.insert(j + 1, keys[j])
            elif how == 1:
                keys.append(keys[rng.randrange(len(keys))])
            else:
                keys = keys + keys
        out.append(keys)
    return out


def capacities_for(points: Sequence[tuple[int, int]], full: int, linear: int, extra: Sequence[int]) -> list[int]:
    caps = {0, 1, full - 1, full, full + linear, 2 * full + linear, U64_MAX // 4, U64_MAX, *extra}
    for t, _ in points:
        caps.update((t - 1, t, t + 1))
    return sorted(c for c in caps if c >= 0)


@pytest.mark.parametrize(
    ("full", "linear", "step", "caps", "seed"),
    [
        (48, 16, 3, (0, 16, 48, 64, 100, 160, 320, 640, 1000, 5000, 100000), 20260701),
        (7, 13, 1, (0, 7, 13, 20, 39, 77, 200, 1000, 40000), 20260702),
        (5, 0, 1, (0, 5, 10, 25, 100, 1000), 20260703),
    ],
)
def test_oracle_points_agree_with_its_direct_answer(
    full: int, linear: int, step: int, caps: tuple[int, ...], seed: int
) -> None:
    rng = random.Random(seed)
    oracle = NaiveHybrid(full, linear, step)
    for keys in chain_trace(rng, 600, dup_rate=0.05):
        pts = oracle.evaluate(keys)
        assert strictly_increasing(pts)
        for c in capacities_for(pts, full, linear, caps):
            assert project_bytes(pts, c) == oracle.hits_at(keys, c)
            if linear == 0:
                assert project_bytes(pts, c) <= oracle.true_hits_at(keys, c)
        assert project_bytes(pts, U64_MAX // 4) == project_infinite(pts)
        assert oracle.process(keys) == pts


# ------------------------------------------------------------------------------------------------
# Differential tests: the engine against the oracle
# ------------------------------------------------------------------------------------------------
def make_times(rng: random.Random, n: int, ttl: int, *, backwards: float = 0.0) -> list[int]:
    """Non-decreasing times with bursts of equal times; `backwards`: chance of a step back."""
    span = max(ttl, 8)
    now = rng.randint(0, span)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            pass
        elif r < 0.75:
            now += rng.randint(1, max(1, span // 16))
        elif r < 0.95:
            now += rng.randint(span // 16, span // 3)
        else:
            now += rng.randint(span // 2, 2 * span)
        if rng.random() < backwards:
            now = max(0, now - rng.randint(1, 2 * span))
        out.append(now)
    return out


def run_differential(
    requests: Sequence[Sequence[int]],
    times: Sequence[int],
    full: int,
    linear: int,
    step: int,
    ttl: int = 0,
    *,
    advances: dict[int, int] | None = None,
    within_every: int = 10,
    check_every: int = 25,
    caps_every: int = 1,
) -> Any:
    """Per request: points equal and strictly increasing; projections equal hits_at; stats equal."""
    hybrid = _engine()
    oracle = NaiveHybrid(full, linear, step, ttl)
    advances = advances or {}
    with hybrid.HybridLane(full_charge=full, linear_charge=linear, step_blocks=step, ttl_ns=ttl) as h:
        for i, (keys, now) in enumerate(zip(requests, times, strict=True)):
            where = f"request {i} keys={list(keys)} now={now} (F={full}, L={linear}, s={step}, ttl={ttl})"
            if i in advances:
                h.advance_time(advances[i])
                oracle.advance_time(advances[i])
            oracle.advance_time(now)
            want = oracle.evaluate(keys)
            if i % caps_every == 0:
                caps = capacities_for(want, full, linear, SHARED_CAPS)
                want_hits = [oracle.hits_at(keys, c) for c in caps]
            assert oracle.process(keys, now) == want
            got = norm(h.process(list(keys), timestamp_ns=now))
            assert got == want, where
            assert strictly_increasing(got), where
            if i % caps_every == 0:
                assert [hybrid.project_steps(got, c) for c in caps] == want_hits, where
            assert hybrid.project_steps(got, U64_MAX) == hybrid.project_steps_infinite(got) == project_infinite(want)
            s = h.stats()
            assert (s.unique_blocks, s.resident_linear, s.resident_bytes, s.expired_blocks) == (
                oracle.unique_blocks(),
                oracle.resident_linear(),
                oracle.resident_bytes(),
                oracle.expired_full_blocks(),
            ), where
            if i % within_every == 0:
                total = oracle.resident_bytes()
                for b in sorted({0, 1, full, full + linear, total // 3, total // 2, total - 1, total, total + 1}):
                    if b >= 0:
                        assert h.full_within_bytes(b) == oracle.full_within_bytes(b), f"{where} budget={b}"
            if i % check_every == 0:
                h.check()
        h.check()
        return h.stats()


SHARED_CAPS = (16, 48, 64, 100, 160, 320, 640, 1000, 5000, 100000, 7, 13, 20, 39, 77, 200, 40000)


@pytest.mark.parametrize(("full", "linear", "step", "seed"), [(48, 16, 3, 20260701), (7, 13, 1, 20260702)])
def test_g7_g8_shared_oracle_comparison(full: int, linear: int, step: int, seed: int) -> None:
    """5.1 #7/#8 on the engine: 600 contract requests (no repeated keys), the upstream capacities."""
    requests = chain_trace(random.Random(seed), 600)
    run_differential(requests, [0] * len(requests), full, linear, step)


CONFIGS = [(48, 16, 3), (7, 13, 1), (10, 1, 2), (16384, 4096, 3), (5, 0, 1), (1, 0, 0), (3, 5, 0), (2, 9, 5)]


@pytest.mark.parametrize(("full", "linear", "step"), CONFIGS)
@pytest.mark.parametrize("seed", [1, 2])
def test_differential_chain_traces(full: int, linear: int, step: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + full + 7 * linear + 31 * step)
    requests = chain_trace(rng, 300, dup_rate=0.04, scrambled=seed == 2)
    run_differential(requests, [0] * len(requests), full, linear, step)


@pytest.mark.parametrize(("full", "linear", "step"), CONFIGS)
@pytest.mark.parametrize("ttl", [1, 50, 1000])
def test_differential_chain_traces_with_ttl(full: int, linear: int, step: int, ttl: int) -> None:
    rng = random.Random(ttl * 10007 + full + 7 * linear + 31 * step)
    requests = chain_trace(rng, 300, dup_rate=0.04, recent=0.7)
    times = make_times(rng, len(requests), ttl)
    # AdvanceTime between two requests, never ahead of the next one
    advances = {
        i: rng.randint(min(times[i - 1], times[i]), times[i]) for i in range(1, len(requests)) if rng.random() < 0.05
    }
    run_differential(requests, times, full, linear, step, ttl, advances=advances)


@pytest.mark.parametrize(("full", "linear", "step"), [(48, 16, 3), (10, 1, 2), (5, 0, 1), (16384, 4096, 3)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_differential_times_going_backwards(full: int, linear: int, step: int, seed: int) -> None:
    """Out-of-order times (clamped in BeginCommit, the watermark stays) and AdvanceTime calls
    ahead of the following requests (the deque can run empty before an earlier time)."""
    ttl = [10, 100, 1000][seed - 1]
    rng = random.Random(seed * 77 + full)
    requests = chain_trace(rng, 300, max_fresh=6, dup_rate=0.03, recent=0.7)
    times = make_times(rng, len(requests), ttl, backwards=0.15)
    advances = {i: times[i] + rng.randint(0, 3 * ttl) for i in range(len(requests)) if rng.random() < 0.08}
    run_differential(requests, times, full, linear, step, ttl, advances=advances)


def small_trie_trace(rng: random.Random, n: int, alphabet: int, depth: int) -> list[list[int]]:
    """Root-to-node paths in a small trie: key = the id of the path prefix (prefix-consistent)."""
    ids: dict[tuple[int, ...], int] = {}
    out = []
    for _ in range(n):
        path = tuple(rng.randrange(alphabet) for _ in range(rng.randint(0, depth)))
        out.append([ids.setdefault(path[: j + 1], len(ids) + 1) for j in range(len(path))])
    return out


@pytest.mark.parametrize(("full", "linear", "step", "ttl"), [(48, 16, 3, 0), (5, 0, 1, 0), (7, 13, 2, 400)])
def test_long_trace_forces_compaction(full: int, linear: int, step: int, ttl: int) -> None:
    rng = random.Random(full * 31 + linear)
    requests = small_trie_trace(rng, 20000, 2, 5)
    times = make_times(rng, len(requests), ttl) if ttl else [0] * len(requests)
    stats = run_differential(requests, times, full, linear, step, ttl, within_every=500, check_every=1000, caps_every=7)
    assert stats.compactions > 0
    assert stats.positions <= 2 * (stats.unique_blocks + stats.resident_linear) + 4096 + 2 * 5


def test_compaction_keeps_the_depth_of_a_cycling_key() -> None:
    """G4: 20000 single-key requests over 7 keys; the next hit still has threshold 7 (charge 1)."""
    hybrid = _engine()
    with hybrid.HybridLane(full_charge=1, linear_charge=0, step_blocks=0) as h:
        for i in range(20000):
            h.process([i % 7])
        s = h.stats()
        assert s.compactions > 0 and s.positions <= 2 * 7 + 4096
        assert norm(h.process([20000 % 7])) == [(7, 1)]
    with hybrid.HybridLane(full_charge=2, linear_charge=3, step_blocks=1) as h:
        for i in range(20000):
            h.process([i % 7])
        assert norm(h.process([20000 % 7])) == [(35, 1)]  # 7 x (2 + 3)
        h.check()


# ------------------------------------------------------------------------------------------------
# The batch entry and the projection helpers
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("full", "linear", "step", "ttl"), [(48, 16, 3, 0), (7, 13, 1, 60), (5, 0, 1, 30)])
def test_process_batch_matches_the_oracle(full: int, linear: int, step: int, ttl: int) -> None:
    hybrid = _engine()
    rng = random.Random(full + ttl)
    requests = chain_trace(rng, 400, dup_rate=0.03, recent=0.5)
    times = make_times(rng, len(requests), max(ttl, 1))
    oracle = NaiveHybrid(full, linear, step, ttl)
    want = [oracle.process(keys, now) for keys, now in zip(requests, times, strict=True)]
    pad = 3  # offsets[0] may be above 0
    keys = np.array([99] * pad + [k for r in requests for k in r], dtype=np.int64)
    offsets = np.cumsum([pad] + [len(r) for r in requests]).astype(np.int64)
    stamps = np.array(times, dtype=np.int64)
    with hybrid.HybridLane(full_charge=full, linear_charge=linear, step_blocks=step, ttl_ns=ttl) as h:
        half = len(requests) // 2
        first = h.process_batch(keys, offsets[: half + 1], stamps[:half])
        second = h.process_batch(keys, offsets[half:], stamps[half:])
        got = [norm(first.request(i)) for i in range(half)] + [
            norm(second.request(i)) for i in range(len(requests) - half)
        ]
        assert got == want
        for facts, lo, hi in ((first, 0, half), (second, half, len(requests))):
            assert facts.points.shape[1] == 2 and facts.point_offsets.shape == (hi - lo + 1,)
            flat = [p for r in want[lo:hi] for p in r]
            assert facts.points.tolist() == [list(p) for p in flat]
            assert facts.point_offsets[0] == 0 and facts.point_offsets[-1] == len(flat)
        s = h.stats()
        assert (s.unique_blocks, s.resident_linear, s.resident_bytes, s.expired_blocks) == (
            oracle.unique_blocks(),
            oracle.resident_linear(),
            oracle.resident_bytes(),
            oracle.expired_full_blocks(),
        )
        assert s.requests == len(requests) and s.accesses == sum(len(r) for r in requests)
        h.check()


def test_projection_helpers() -> None:
    hybrid = _engine()
    pts = [(20, 2), (40, 4), (52, 5)]
    for c in (0, 1, 19, 20, 21, 39, 40, 51, 52, 53, U64_MAX):
        assert hybrid.project_steps(pts, c) == project_bytes(pts, c)
        assert hybrid.project_steps(np.array(pts, dtype=np.uint64), c) == project_bytes(pts, c)
    assert hybrid.project_steps_infinite(pts) == 5
    assert hybrid.project_steps([], 10) == 0 and hybrid.project_steps_infinite([]) == 0
    big = [(2**63, 1), (U64_MAX, 2)]
    assert [hybrid.project_steps(big, c) for c in (2**63 - 1, 2**63, U64_MAX)] == [0, 1, 2]


def test_rejects_a_zero_full_charge() -> None:
    hybrid = _engine()
    with pytest.raises(ValueError):
        hybrid.HybridLane(full_charge=0, linear_charge=4, step_blocks=2)
    with pytest.raises(ValueError):
        NaiveHybrid(0, 4, 2)
