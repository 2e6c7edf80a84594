"""LaneViews: one lane replayed for several TTLs at once. Each view must give exactly what a lane
of its own TTL gives (curves, cut reasons, alive and expired counts), and what the naive LRU+TTL
oracle (tests/support/oracle.py, which shares nothing with the C core) gives at every capacity."""

from __future__ import annotations

import random

import numpy as np
import pytest

from core_c import CUT_COLD, CUT_EXPIRED, CUT_NONE, MAX_VIEWS, CoreError, CoreInvalidArgument, Lane, LaneViews
from tests.support.oracle import NaiveLru


def _flat(requests: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.array([k for r in requests for k in r], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in requests])]).astype(np.int64)
    return keys, offsets


def _trace(rng: random.Random, n: int, universe: int, repeats: bool = True) -> tuple[list[list[int]], list[int]]:
    """Requests sharing prefixes, empty requests, a clock that sometimes stands still and sometimes
    runs backwards, and (`repeats`) a block twice in one request: outside the contract the naive
    oracle holds to (there the curves' monotone defense is only never optimistic)."""
    requests, times, now = [], [], 0
    for _ in range(n):
        base = rng.randrange(universe)
        length = rng.choice([0, 1, 2, 3, 5, 8])
        keys = [base * 50 + i for i in range(length)]
        if repeats and keys and rng.random() < 0.1:
            keys.insert(rng.randrange(len(keys) + 1), rng.choice(keys))  # a block twice in one request
        requests.append(keys)
        now += rng.choice([0, 0, 1, 3, 10, 40])
        times.append(now - 25 if rng.random() < 0.03 else now)  # the lane's clock never runs backwards
    return requests, times


def _ttl_sets(rng: random.Random) -> list[int]:
    views = rng.randint(2, 5)
    return [rng.choice([0, 1, 7, 30, 30, 90, 400]) for _ in range(views)]


def _hits(curve: tuple[tuple[int, int], ...], capacity: int | None) -> int:
    """Prefix hits at a capacity, from the curve's definition: block j of segment (start, run)
    hits at every capacity >= start + j."""
    if capacity is None:
        return sum(run for _, run in curve)
    return sum(min(run, max(0, capacity - start + 1)) for start, run in curve)


def _assert_same(got: object, want: object, view: int, cuts: bool) -> None:
    assert np.array_equal(got.seg_offsets, want.seg_offsets), view  # type: ignore[attr-defined]
    assert np.array_equal(got.segments, want.segments), view  # type: ignore[attr-defined]
    if cuts:
        assert np.array_equal(got.cuts, want.cuts), view  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("keep_expired", [False, True])
def test_every_view_is_the_lane_of_its_ttl(seed: int, keep_expired: bool) -> None:
    """Batch by batch (clock moves between batches too): facts, cut reasons (exact with
    keep_expired), alive and expired counts equal those of one lane per TTL."""
    rng = random.Random(seed)
    ttls = _ttl_sets(rng)
    requests, times = _trace(rng, 3000, rng.choice([6, 40, 300]))
    singles = [Lane(ttl_ns=t, keep_expired=keep_expired) for t in ttls]
    with LaneViews(ttls, keep_expired=keep_expired) as views:
        at = 0
        while at < len(requests):
            size = rng.randint(1, 400)
            keys, offsets = _flat(requests[at : at + size])
            ts = np.array(times[at : at + size], dtype=np.int64)
            got = views.process_batch(keys, offsets, ts)
            for v, lane in enumerate(singles):
                _assert_same(got[v], lane.process_batch(keys, offsets, ts), v, cuts=keep_expired)
                assert views.stats(v).unique_blocks == lane.unique_blocks, (v, at)
                assert views.stats(v).expired_blocks == lane.expired_blocks, (v, at)
            at = min(at + size, len(requests))
            if rng.random() < 0.2:
                later = times[at - 1] + rng.choice([5, 50, 500])
                views.advance_time(later)
                for lane in singles:
                    lane.advance_time(later)
            views.check()
        assert views.stats(0).requests == len(requests)
    for lane in singles:
        lane.close()


@pytest.mark.parametrize("seed", range(4))
def test_views_match_the_naive_oracle_at_every_capacity(seed: int) -> None:
    """Per view and capacity, the prefix hits equal the naive LRU+TTL cache's; the cut reason is
    the naive one: none when every block was alive, cold when the first missing block was never
    seen, expired when it was seen but its TTL ran out (exact with keep_expired)."""
    rng = random.Random(100 + seed)
    ttls = [0, 20, 90, 20, 5][: 2 + seed % 4]
    capacities: list[int | None] = [1, 2, 4, 9, 30, None]
    oracles = [[NaiveLru(c, t) for c in capacities] for t in ttls]
    last: dict[int, int] = {}
    requests, times = _trace(rng, 1500, 25, repeats=False)
    clock = 0
    with LaneViews(ttls, keep_expired=True) as views:
        for keys, now in zip(requests, times, strict=True):
            clock = max(clock, now)
            facts = views.process_batch(*_flat([keys]), np.array([clock], dtype=np.int64))
            for v, ttl in enumerate(ttls):
                curve = facts[v].curve(0)
                hits = [_hits(curve, c) for c in capacities]
                assert hits == [o.request(keys, clock) for o in oracles[v]], (v, keys)
                missing = [k for k in keys if k not in last or (ttl and clock - last[k] >= ttl)]
                want = CUT_NONE
                if missing:
                    first = next(k for k in keys if k in missing)
                    want = CUT_COLD if first not in last else CUT_EXPIRED
                assert int(facts[v].cuts[0]) == want, (v, keys)
            for k in keys:
                last[k] = clock


@pytest.mark.parametrize("ttls", [[0, 3], [50, 3, 12], [3, 3], [0, 0, 8]])
def test_compactions_with_watermarks_apart(ttls: list[int]) -> None:
    """Few keys, many requests: the lane compacts many times while its views' watermarks lie far
    apart (a short TTL next to a long one or none); every view stays its own lane."""
    rng = random.Random(sum(ttls))
    requests = [[rng.randrange(60) * 10 + i for i in range(rng.randint(1, 4))] for _ in range(20000)]
    times = list(range(0, 2 * len(requests), 2))
    keys, offsets = _flat(requests)
    ts = np.array(times, dtype=np.int64)
    with LaneViews(ttls) as views:
        got = views.process_batch(keys, offsets, ts)
        views.check()
        assert views.stats().compactions > 3
        for v, ttl in enumerate(ttls):
            with Lane(ttl_ns=ttl) as lane:
                _assert_same(got[v], lane.process_batch(keys, offsets, ts), v, cuts=False)
                assert views.stats(v).unique_blocks == lane.unique_blocks
                assert views.stats(v).expired_blocks == lane.expired_blocks


def test_one_view_is_a_lane() -> None:
    rng = random.Random(3)
    requests, times = _trace(rng, 500, 20)
    keys, offsets = _flat(requests)
    ts = np.array(times, dtype=np.int64)
    with LaneViews([30]) as views, Lane(ttl_ns=30) as lane:
        (got,) = views.process_batch(keys, offsets, ts)
        _assert_same(got, lane.process_batch(keys, offsets, ts), 0, cuts=True)


def test_a_failing_request_leaves_each_view_its_partial_facts() -> None:
    keys = np.array([1, 2, 3, 1, 2], dtype=np.int64)
    offsets = np.array([0, 3, 5, 4], dtype=np.int64)  # request 2 ends before it starts
    with LaneViews([0, 10]) as views:
        with pytest.raises(CoreError) as failed:
            views.process_batch(keys, offsets, np.array([0, 20, 30], dtype=np.int64))
        assert failed.value.index == 2
        partial = failed.value.partial
        assert [f.curve(1) for f in partial] == [((1, 2),), ()]  # the TTL 10 view: 1 and 2 expired at 20
        assert [len(f) for f in partial] == [2, 2]
        views.check()


def test_bad_views_are_refused() -> None:
    with pytest.raises(CoreInvalidArgument, match="1 to 16 TTL views, not 0"):
        LaneViews([])
    with pytest.raises(CoreInvalidArgument, match="TTL views"):
        LaneViews([0] * (MAX_VIEWS + 1))
    with pytest.raises(CoreInvalidArgument, match="must not be negative"):
        LaneViews([0, -1])
    with LaneViews([0, 5]) as views, pytest.raises(ValueError, match="needs timestamps"):
        views.process_batch(np.array([1], dtype=np.int64), np.array([0, 1], dtype=np.int64))
    with LaneViews([0, 5]) as views, pytest.raises(IndexError):
        views.stats(2)
