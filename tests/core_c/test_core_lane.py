"""The lane core: the seed's worked example, the original LiteHitTest / LiteHitTtlTest
scenarios with their exact values, batch semantics and lifecycle."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import core_c
from core_c import CUT_COLD, CUT_EXPIRED, CUT_NONE, Lane

A, B, C, D, E = 101, 102, 103, 104, 105


def replay(lane: Lane, requests: list[list[int]], times: list[int] | None = None) -> list[object]:
    times = times or [0] * len(requests)
    return [lane.process(keys, t) for keys, t in zip(requests, times, strict=True)]


class TestWorkedExample:
    """Seed §10 / spec §6.9: block_size_tokens 4, block_bytes 1024."""

    REQUESTS = ((A, B, C), (A, B, D), (A, B, C), (A, E), (A, E))
    LENS = (13, 12, 13, 8, 8)

    def test_curves(self) -> None:
        with Lane() as lane:
            curves = replay(lane, [list(r) for r in self.REQUESTS])
        assert curves == [(), ((1, 2),), ((1, 2), (4, 1)), ((1, 1),), ((1, 2),)]

    def test_projection_table(self) -> None:
        with Lane() as lane:
            curves = replay(lane, [list(r) for r in self.REQUESTS])
        for capacity_bytes, per_request, tokens in [
            (2048, [0, 2, 2, 1, 2], 28),
            (3072, [0, 2, 2, 1, 2], 28),
        ]:
            hits = [core_c.project_bytes(c, capacity_bytes, 1024) for c in curves]
            assert hits == per_request
            assert sum(hits) * 4 == tokens
        assert [core_c.project_infinite(c) for c in curves] == [0, 2, 3, 1, 2]
        assert round(28 / sum(self.LENS), 4) == 0.5185
        assert round(32 / sum(self.LENS), 4) == 0.5926


class TestLiteHit:
    def test_empty_request_is_noop(self) -> None:
        with Lane() as lane:
            assert lane.process([]) == ()
            assert lane.unique_blocks == 0

    def test_cold_request_produces_empty_curve_but_commits(self) -> None:
        with Lane() as lane:
            assert lane.process([1, 2, 3]) == ()
            assert lane.unique_blocks == 3

    def test_contiguous_chain_replay_is_one_segment(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2, 3], [1, 2, 3]])[1] == ((1, 3),)

    def test_interleaving_chain_breaks_segments(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2, 3], [1, 2, 9], [1, 2, 3]])[2] == ((1, 2), (4, 1))

    def test_curve_stops_at_first_cold_key(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2, 3], [1, 7, 3]])[1] == ((1, 1),)

    def test_blocks_after_first_miss_still_update_global_lru(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2], [1, 3, 2], [2]])[1:] == [((1, 1),), ((3, 1),)]

    def test_reverse_commit_keeps_chain_head_most_recent(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2, 3], [1], [3]])[1:] == [((1, 1),), ((3, 1),)]

    def test_repeated_keys_encode_monotonically_and_never_optimistically(self) -> None:
        with Lane() as lane:
            curves = replay(lane, [[1, 2], [2, 2, 1, 2], [2, 1]])
        assert curves[1] == ((2, 4),)  # raw prefix max 2,2,2,2 -> encoded 2,3,4,5
        assert curves[2] == ((1, 2),)

    def test_reset_clears_lru_state(self) -> None:
        with Lane() as lane:
            lane.process([1, 2])
            lane.reset()
            assert lane.unique_blocks == 0
            assert lane.process([1, 2]) == ()

    def test_compacts_dynamic_positions_without_changing_results(self) -> None:
        with Lane() as lane:
            for i in range(20000):
                lane.process([i % 7])
            stats = lane.stats()
            assert stats.unique_blocks == 7
            assert stats.positions <= 4 * stats.tracked_keys + 4096  # lh_lane.c COMPACT_FACTOR
            assert stats.compactions > 0
            assert lane.process([(20000 - 7) % 7]) == ((7, 1),)
            lane.check()

    def test_retains_all_active_keys_without_capacity_pruning(self) -> None:
        with Lane() as lane:
            for i in range(10000):
                lane.process([i])
            assert lane.unique_blocks == 10000
            assert lane.process([0]) == ((10000, 1),)


class TestTtl:
    def test_strict_deadline_boundary(self) -> None:
        with Lane(ttl_ns=2000) as lane:
            assert lane.process([1, 2, 3], 1000) == ()
            assert lane.process([1, 2, 3], 2999) == ((1, 3),)
            assert lane.process([1, 2, 3], 4999) == ()  # age exactly 2000: dead
            assert core_c.project_infinite(lane.process([1, 2, 3], 5000)) == 3  # revived at 4999

    def test_expired_block_stops_the_prefix_like_a_cold_one(self) -> None:
        with Lane(ttl_ns=2500) as lane:
            curves = replay(lane, [[10, 11], [10, 11, 12], [10, 11, 12]], [1000, 3000, 5600])
        assert curves[2] == ()

    def test_ttl_zero_is_pure_lru(self) -> None:
        with Lane() as lane:
            assert replay(lane, [[1, 2, 3], [1, 2, 3]], [1000, 10**12])[1] == ((1, 3),)

    def test_reset_clears_ttl_state(self) -> None:
        with Lane(ttl_ns=10**6) as lane:
            lane.process([1, 2], 0)
            assert lane.unique_blocks == 2
            lane.reset()
            assert lane.unique_blocks == 0
            assert lane.process([1, 2], 1) == ()

    def test_unique_blocks_exclude_expired(self) -> None:
        with Lane(ttl_ns=1000) as lane:
            lane.process([1, 2, 3], 0)
            assert lane.unique_blocks == 3
            lane.process([100], 5000)
            assert lane.unique_blocks == 1

    def test_compaction_drops_expired_entries(self) -> None:
        with Lane(ttl_ns=1000) as lane:
            for r in range(600):
                lane.process(list(range(r * 10, r * 10 + 10)), 0)
            assert lane.unique_blocks == 6000
            lane.process([1, 2, 3], 5000)
            stats = lane.stats()
            assert stats.unique_blocks == 3
            assert stats.tracked_keys == 3
            assert stats.map_slots < 1000
            assert lane.process([1000000], 5001) == ()
            assert lane.process([1, 2, 3], 5001) == ((2, 3),)
            lane.check()

    def test_compaction_collapses_empty_epochs(self) -> None:
        with Lane(ttl_ns=10**9) as lane:
            for t in range(1, 10001):
                lane.process([7], t)
            stats = lane.stats()
            assert stats.epochs <= 4200
            assert stats.unique_blocks == 1
            assert lane.process([7], 10001) == ((1, 1),)
            assert lane.process([7], 10001 + 10**9) == ()

    def test_advance_time_refreshes_unique_count(self) -> None:
        with Lane(ttl_ns=1000) as lane:
            lane.process([1, 2], 0)
            lane.advance_time(999)
            assert lane.unique_blocks == 2
            lane.advance_time(1000)
            assert lane.unique_blocks == 0
            lane.process([1], 1000)
            assert lane.unique_blocks == 1
        with Lane() as plain:
            plain.process([1, 2], 0)
            plain.advance_time(10**15)
            assert plain.unique_blocks == 2

    def test_counts_ttl_expired_blocks(self) -> None:
        with Lane(ttl_ns=1000) as lane:
            lane.process([1, 2, 3], 0)
            assert lane.expired_blocks == 0
            lane.process([1], 2000)
            assert lane.expired_blocks == 3
            lane.advance_time(2500)
            assert lane.expired_blocks == 3
            lane.advance_time(3000)
            assert lane.expired_blocks == 4
            lane.reset()
            assert lane.expired_blocks == 0

    def test_clock_never_runs_backwards(self) -> None:
        with Lane(ttl_ns=1000) as lane:
            lane.process([1], 5000)
            # An earlier timestamp is treated as 5000: the block is 0 ns old, not -4000.
            assert lane.process([1], 10) == ((1, 1),)
            assert lane.process([1], 5999) == ((1, 1),)
            assert lane.process([1], 6999) == ()


class TestCuts:
    def test_cut_reasons(self) -> None:
        keys = np.array([1, 2, 1, 2, 3, 1, 2], dtype=np.int64)
        offsets = np.array([0, 2, 5, 7], dtype=np.int64)
        with Lane(ttl_ns=100) as lane:
            facts = lane.process_batch(keys, offsets, np.array([0, 10, 500]))
        assert [facts.curve(i) for i in range(3)] == [(), ((1, 2),), ()]
        assert facts.cuts.tolist() == [CUT_COLD, CUT_COLD, CUT_EXPIRED]

    def test_no_cut_when_every_block_is_resident(self) -> None:
        with Lane() as lane:
            facts = lane.process_batch(np.array([5, 5, 6]), np.array([0, 1, 2, 2, 3]))
        assert facts.cuts.tolist() == [CUT_COLD, CUT_NONE, CUT_NONE, CUT_COLD]

    def test_keep_expired_tells_reclaimed_keys_from_cold_ones(self) -> None:
        requests = [list(range(i * 10, i * 10 + 10)) for i in range(600)]
        for keep, expected in [(False, CUT_COLD), (True, CUT_EXPIRED)]:
            with Lane(ttl_ns=1000, keep_expired=keep) as lane:
                for keys in requests:
                    lane.process(keys, 0)
                lane.process([999999], 5000)  # everything expires; compaction runs
                assert lane.stats().compactions >= 1
                facts = lane.process_batch(np.array([42]), np.array([0, 1]), np.array([5001]))
                assert facts.cuts.tolist() == [expected]
                lane.check()


class TestBatch:
    def test_batch_equals_single_requests(self) -> None:
        rng = np.random.default_rng(7)
        requests = [list(rng.integers(0, 50, size=rng.integers(0, 8))) for _ in range(300)]
        with Lane() as one, Lane() as batch:
            singles = [one.process(r) for r in requests]
            flat = np.array([k for r in requests for k in r], dtype=np.int64)
            offsets = np.cumsum([0] + [len(r) for r in requests])
            facts = batch.process_batch(flat, offsets)
        assert [facts.curve(i) for i in range(len(requests))] == singles

    def test_failure_mid_batch_commits_earlier_requests_only(self) -> None:
        keys = np.array([1, 2, 3, 4], dtype=np.int64)
        offsets = np.array([0, 2, 1, 4], dtype=np.int64)  # request 1 has negative length
        with Lane() as lane:
            with pytest.raises(core_c.CoreInvalidArgument) as info:
                lane.process_batch(keys, offsets)
            assert info.value.index == 1
            assert info.value.partial.curve(0) == ()  # type: ignore[attr-defined]
            assert lane.unique_blocks == 2  # request 0 committed, request 1 changed nothing
            assert lane.stats().requests == 1
            lane.check()

    def test_key_numbers_of_blocks_not_replayed_are_zero(self) -> None:
        # the numbers' array is not zeroed up front: the blocks before offsets[0], and the
        # failing request's and those after it, are zeroed after the call
        keys = np.array([5, 6, 7, 8, 9, 7, 10, 11], dtype=np.int64)
        with Lane(key_ids=True) as lane:
            facts = lane.process_batch(keys, np.array([2, 4, 6], dtype=np.int64))
            assert facts.key_ids is not None and list(facts.key_ids) == [0, 0, 0, 1, 2, 0, 0, 0]
            with pytest.raises(core_c.CoreInvalidArgument) as info:
                lane.process_batch(keys, np.array([0, 3, 2, 8], dtype=np.int64))  # request 1 has negative length
            assert info.value.index == 1
            partial = info.value.partial  # type: ignore[attr-defined]
            assert list(partial.key_ids) == [3, 4, 0, 0, 0, 0, 0, 0]

    def test_ttl_lane_requires_timestamps(self) -> None:
        with Lane(ttl_ns=5) as lane, pytest.raises(ValueError):
            lane.process_batch(np.array([1]), np.array([0, 1]))

    def test_uint64_keys_wrap_to_int64(self) -> None:
        with Lane() as lane:
            lane.process([2**64 - 1])
            assert lane.process([-1]) == ((1, 1),)


class TestLifecycle:
    def test_close_is_idempotent_and_blocks_use(self) -> None:
        lane = Lane()
        lane.process([1])
        lane.close()
        lane.close()
        assert lane.closed
        with pytest.raises(ValueError, match="closed"):
            lane.process([1])

    def test_finalizer_releases_on_collection(self) -> None:
        lane = Lane()
        finalizer = lane._finalizer
        del lane
        gc.collect()
        assert not finalizer.alive

    def test_negative_ttl_is_rejected(self) -> None:
        with pytest.raises(core_c.CoreInvalidArgument, match="ttl_ns"):
            Lane(ttl_ns=-1)

    def test_memory_is_reported(self) -> None:
        with Lane() as lane:
            before = lane.memory_bytes
            lane.process(list(range(100000)))
            assert lane.memory_bytes > before + 100000 * 12
