"""core_c.evidence.EvidenceSet (lh_evidence.h) through its binding: golden cases (stored, removed,
stored again, cleared, expiry at the exact bucket boundary, forget), the error mapping (every bad
batch raises CoreInvalidArgument naming the problem and leaves the set unchanged: every stats
field and every lookup compared), stats (counts, expiry, filter inserts, bytes per entry),
lifecycle, and a hypothesis differential test against the naive model below (nothing shared with
the engine): exact without a filter, and with one no false negatives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_c.errors import CoreInvalidArgument
from core_c.evidence import (
    ABSENT,
    AGED,
    CLEARED,
    MAX_BATCH,
    REMOVED,
    REMOVED_EVENT,
    RESIDENT,
    STORED,
    EvidenceSet,
    EvidenceStats,
)

Event = tuple[int, tuple[int, ...]]  # (kind, digests)


def flat(events: Sequence[Event]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kinds = np.array([kind for kind, _ in events], dtype=np.uint8)
    offsets = np.cumsum([0] + [len(ds) for _, ds in events]).astype(np.int64)
    digests = np.array([d for _, ds in events for d in ds], dtype=np.int64)
    return kinds, offsets, digests


def apply(ev: EvidenceSet, batch: int, *events: Event) -> None:
    ev.apply(batch, *flat(events))


def looked_up(ev: EvidenceSet, digests: Sequence[int]) -> list[tuple[int, int]]:
    kinds, batches = ev.lookup(np.array(digests, dtype=np.int64))
    assert kinds.dtype == np.uint8 and batches.dtype == np.uint32
    return [(int(k), int(b)) for k, b in zip(kinds, batches, strict=True)]


def one(ev: EvidenceSet, digest: int) -> tuple[int, int]:
    return looked_up(ev, [digest])[0]


@dataclass
class NaiveEvidence:
    """The header's contract, read literally: a removal is filed in the current bucket and kept
    while that bucket is one of the last ``ring`` buckets."""

    ring: int
    filter: bool
    bucket: int = 0
    last_batch: int = 0
    resident: dict[int, int] = field(default_factory=dict)  # digest -> batch that stored it
    removed: dict[int, tuple[int, int]] = field(default_factory=dict)  # digest -> (batch, bucket)
    aged: set[int] = field(default_factory=set)
    expired: int = 0
    inserts: int = 0

    def advance(self, bucket: int) -> None:
        if bucket < self.bucket:
            return
        self.bucket = bucket
        for digest, (_, filed) in list(self.removed.items()):
            if filed <= bucket - self.ring:
                del self.removed[digest]
                self.aged.add(digest)
                self.expired += 1
                self.inserts += self.filter

    def apply(self, batch: int, events: Sequence[Event]) -> None:
        self.last_batch = batch
        for kind, digests in events:
            if kind == CLEARED:
                digests = tuple(self.resident)
            for d in digests:
                if kind == STORED:
                    self.resident[d] = batch
                else:
                    self.resident.pop(d, None)
                    self.removed[d] = (batch, self.bucket)

    def forget(self) -> None:
        known = [*self.resident, *self.removed]
        self.aged.update(known)
        self.inserts += len(known) * self.filter
        self.resident.clear()
        self.removed.clear()
        self.last_batch = 0

    def lookup(self, digest: int) -> tuple[int, int]:
        if digest in self.resident:
            return RESIDENT, self.resident[digest]
        if digest in self.removed:
            return REMOVED, self.removed[digest][0]
        return (AGED, 0) if self.filter and digest in self.aged else (ABSENT, 0)


def assert_matches(ev: EvidenceSet, model: NaiveEvidence, keys: Sequence[int]) -> None:
    for key, got in zip(keys, looked_up(ev, keys), strict=True):
        want = model.lookup(key)
        if model.filter and want == (ABSENT, 0):
            assert got in {(ABSENT, 0), (AGED, 0)}, key  # a Bloom filter may say "aged" wrongly
        else:
            assert got == want, key  # ... but never forgets one
    s = ev.stats()
    assert (s.resident, s.evidence, s.expired, s.filter_inserts) == (
        len(model.resident),
        len(model.removed),
        model.expired,
        model.inserts,
    )
    assert (s.bucket, s.last_batch) == (model.bucket, model.last_batch)


# --------------------------------------------------------------------------------------------
# golden cases


def test_stored_removed_stored_again_and_cleared() -> None:
    with EvidenceSet(ring_buckets=3, filter_log2_bits=0) as ev:
        assert one(ev, 10) == (ABSENT, 0)
        apply(ev, 1, (STORED, (10, 20, 30)))
        apply(ev, 2, (REMOVED_EVENT, (10,)))
        assert looked_up(ev, [10, 20]) == [(REMOVED, 2), (RESIDENT, 1)]
        apply(ev, 4, (STORED, (10,)))  # batch numbers may skip
        assert one(ev, 10) == (RESIDENT, 4)
        assert (ev.stats().resident, ev.stats().evidence) == (3, 1)  # the evidence stays, hidden
        # one batch: stored 40, removed 20, cleared (10, 30, 40), stored 50
        apply(ev, 5, (STORED, (40,)), (REMOVED_EVENT, (20,)), (CLEARED, ()), (STORED, (50,)))
        assert looked_up(ev, [10, 20, 30, 40, 50]) == [(REMOVED, 5)] * 4 + [(RESIDENT, 5)]
        apply(ev, 6, (REMOVED_EVENT, (2**63 - 1, -(2**63))))  # never stored: evidence all the same
        assert looked_up(ev, [2**63 - 1, -(2**63), 0]) == [(REMOVED, 6), (REMOVED, 6), (ABSENT, 0)]
        apply(ev, 7)  # an empty batch takes its number
        assert ev.stats().last_batch == 7


@pytest.mark.parametrize("filter_log2_bits", [0, 10])
@pytest.mark.parametrize("ring", [1, 2, 5])
def test_expiry_at_the_bucket_boundary(ring: int, filter_log2_bits: int) -> None:
    gone = (AGED, 0) if filter_log2_bits else (ABSENT, 0)
    with EvidenceSet(ring, filter_log2_bits) as ev:
        ev.advance(100)
        apply(ev, 1, (REMOVED_EVENT, (7,)))
        ev.advance(100 + ring - 1)
        ev.advance(3)  # backwards: ignored
        assert one(ev, 7) == (REMOVED, 1)
        assert ev.stats().bucket == 100 + ring - 1
        ev.advance(100 + ring)
        assert one(ev, 7) == gone
        s = ev.stats()
        assert (s.expired, s.evidence, s.filter_inserts) == (1, 0, 1 if filter_log2_bits else 0)


@pytest.mark.parametrize("filter_log2_bits", [0, 12])
def test_forget_ages_everything_and_restarts_numbering(filter_log2_bits: int) -> None:
    gone = (AGED, 0) if filter_log2_bits else (ABSENT, 0)
    with EvidenceSet(4, filter_log2_bits) as ev:
        apply(ev, 1, (STORED, (1, 2)))
        apply(ev, 2, (REMOVED_EVENT, (2, 3)))
        ev.forget()
        assert looked_up(ev, [1, 2, 3]) == [gone] * 3
        s = ev.stats()
        assert (s.resident, s.evidence, s.last_batch, s.expired) == (0, 0, 0, 0)
        assert s.filter_inserts == (3 if filter_log2_bits else 0)
        apply(ev, 1, (STORED, (1,)))
        assert one(ev, 1) == (RESIDENT, 1)


# --------------------------------------------------------------------------------------------
# errors


def snapshot(ev: EvidenceSet) -> tuple[EvidenceStats, list[tuple[int, int]]]:
    return ev.stats(), looked_up(ev, [*range(-3, 12), 1000, 2000])


def busy_set() -> EvidenceSet:
    """Resident, removed and aged digests, and a last batch of 4."""
    ev = EvidenceSet(2, 10)
    apply(ev, 1, (STORED, (1, 2, 3, 4, 5)))
    apply(ev, 2, (REMOVED_EVENT, (1, 2)))
    ev.advance(2)
    apply(ev, 3, (REMOVED_EVENT, (3,)))
    apply(ev, 4, (STORED, (6, 7)))
    assert looked_up(ev, [1, 3, 6, 9]) == [(AGED, 0), (REMOVED, 3), (RESIDENT, 4), (ABSENT, 0)]
    return ev


BIG = tuple(range(100, 400))  # a valid first event: applied (or room reserved) before the error, it would show
BAD_BATCHES: dict[str, tuple[int, list[int], list[int], tuple[int, ...], str]] = {
    # name: batch, kinds, offsets, digests, what the message names
    "batch not increasing": (4, [STORED], [0, 300], BIG, "batch 4"),
    "batch decreasing": (2, [STORED], [0, 300], BIG, "batch 2"),
    "batch zero": (0, [], [0], (), "batch 0"),
    "batch above the maximum": (MAX_BATCH + 1, [STORED], [0, 300], BIG, "batch"),
    "kind 3": (5, [STORED, 3], [0, 300, 300], BIG, "kind 3"),
    "kind 255": (5, [STORED, REMOVED_EVENT, 255], [0, 200, 300, 300], BIG, "kind 255"),
    "decreasing offsets": (5, [STORED, STORED, STORED], [0, 200, 100, 300], BIG, "offsets must not decrease"),
    "offsets[0] not 0": (5, [STORED, STORED], [1, 200, 300], BIG, "offsets[0]"),
    "cleared with digests": (5, [STORED, CLEARED], [0, 299, 300], BIG, "cleared event takes no digests"),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_raises_and_changes_nothing(case: str) -> None:
    batch, kinds, offsets, digests, says = BAD_BATCHES[case]
    with busy_set() as ev:
        before = snapshot(ev)
        with pytest.raises(CoreInvalidArgument, match=says.replace("[", r"\[").replace("]", r"\]")) as info:
            ev.apply(batch, np.array(kinds, dtype=np.uint8), np.array(offsets), np.array(digests, dtype=np.int64))
        assert info.value.status_name == "LH_EINVAL"
        assert snapshot(ev) == before
        apply(ev, 5, (STORED, (9,)))  # the failed batch took no number
        assert one(ev, 9) == (RESIDENT, 5)


def test_offsets_not_matching_the_digests_raise_before_the_core() -> None:
    with busy_set() as ev:
        before = snapshot(ev)
        for offsets in ([0, 3], [0], [0, 1, 2], [0, 1, 4]):
            with pytest.raises(ValueError, match="offsets"):
                ev.apply(5, np.array([STORED, STORED], dtype=np.uint8), np.array(offsets), np.array([1, 2, 3]))
        assert snapshot(ev) == before


def test_largest_batch_then_forget() -> None:
    with busy_set() as ev:
        apply(ev, MAX_BATCH, (STORED, (9,)))
        assert one(ev, 9) == (RESIDENT, MAX_BATCH)
        before = snapshot(ev)
        with pytest.raises(CoreInvalidArgument, match="batch"):
            apply(ev, MAX_BATCH)
        assert snapshot(ev) == before
        ev.forget()
        apply(ev, 1)


@pytest.mark.parametrize(
    ("ring", "filter_log2_bits", "says"),
    [
        (0, 0, "ring_buckets"),
        (0, 12, "ring_buckets"),
        (3, 1, "filter_log2_bits"),
        (3, 5, "filter_log2_bits"),
        (3, 41, "filter_log2_bits"),
    ],
)
def test_bad_create_raises(ring: int, filter_log2_bits: int, says: str) -> None:
    with pytest.raises(CoreInvalidArgument, match=says):
        EvidenceSet(ring, filter_log2_bits)


# --------------------------------------------------------------------------------------------
# stats and lifecycle


def test_stats() -> None:
    rng = np.random.default_rng(5)
    with EvidenceSet(3, 16) as ev:
        s = ev.stats()
        assert (s.filter_bits, s.filter_bytes, s.filter_set, s.filter_false_positive_rate) == (65536, 8192, 0, 0.0)
        assert (s.resident, s.evidence, s.resident_bytes, s.evidence_bytes, s.expired) == (0, 0, 0, 0, 0)
        fresh = iter(rng.choice(2**62, size=20000, replace=False) - 2**61)  # distinct digests
        for batch in range(1, 121):
            n = int(rng.integers(1, 150))
            digests = np.array([next(fresh) for _ in range(n)], dtype=np.int64)
            kind = STORED if batch % 2 else REMOVED_EVENT
            ev.apply(batch, np.array([kind], dtype=np.uint8), np.array([0, n]), digests)
            s = ev.stats()
            for count, nbytes in ((s.resident, s.resident_bytes), (s.evidence, s.evidence_bytes)):
                assert nbytes % 12 == 0 and (nbytes // 12) & (nbytes // 12 - 1) == 0  # power-of-two slots
                if count >= 64:
                    assert 13.3 <= nbytes / count <= 26.7, (count, nbytes)
        assert s.resident >= 64 and s.evidence >= 64
        removed = s.evidence
        ev.advance(3)
        s = ev.stats()
        assert (s.evidence, s.expired, s.filter_inserts, s.bucket) == (0, removed, removed, 3)
        assert 0 < s.filter_set <= min(3 * removed, s.filter_bits)
        assert s.filter_false_positive_rate == pytest.approx((s.filter_set / 65536) ** 3)


def test_close_is_idempotent_and_use_after_close_raises() -> None:
    ev = EvidenceSet(2, 0)
    apply(ev, 1, (STORED, (1,)))
    ev.close()
    ev.close()
    assert ev.closed
    empty = np.zeros(0, dtype=np.int64)
    for call in (
        lambda: ev.advance(1),
        lambda: ev.apply(2, np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64), empty),
        lambda: ev.lookup(empty),
        ev.forget,
        ev.stats,
        lambda: ev.sweep(1),
        ev.trim,
    ):
        with pytest.raises(ValueError, match="closed"):
            call()
    with EvidenceSet(2, 0) as other:
        assert not other.closed
    assert other.closed


# --------------------------------------------------------------------------------------------
# differential

KEYS = [0, 1, 2, 3, 5, 8, 13, 21, -1, -7, 2**63 - 1, -(2**63), 2**40 + 3, 123456789]

events_st = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([STORED, REMOVED_EVENT]), st.lists(st.sampled_from(KEYS), max_size=5).map(tuple)),
        st.just((CLEARED, ())),
    ),
    max_size=4,
)
ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), st.integers(1, 3), events_st),
        st.tuples(st.just("advance"), st.integers(-2, 7), st.just([])),
        st.tuples(st.just("forget"), st.just(0), st.just([])),
        st.tuples(st.just("bad"), st.integers(0, 2), events_st),
    ),
    max_size=60,
)


def run_differential(ring: int, filter_log2_bits: int, ops: list[tuple[str, int, list[Event]]]) -> None:
    model = NaiveEvidence(ring, filter_log2_bits != 0)
    with EvidenceSet(ring, filter_log2_bits) as ev:
        for op, number, events in ops:
            if op == "apply":
                batch = model.last_batch + number
                apply(ev, batch, *events)
                model.apply(batch, events)
            elif op == "advance":
                bucket = max(0, model.bucket + number)
                ev.advance(bucket)
                model.advance(bucket)
            elif op == "forget":
                ev.forget()
                model.forget()
            else:  # a batch number already used, or a kind the core does not know: nothing changes
                kinds, offsets, digests = flat([*events, (3 + number, ())])
                batch = model.last_batch + 1 if number else model.last_batch
                with pytest.raises(CoreInvalidArgument):
                    ev.apply(batch, kinds if number else kinds[:-1], offsets if number else offsets[:-1], digests)
            assert_matches(ev, model, KEYS)


@settings(max_examples=200, deadline=None)
@given(ring=st.sampled_from([1, 2, 3, 6]), ops=ops_st)
def test_differential_exact_without_filter(ring: int, ops: list[tuple[str, int, list[Event]]]) -> None:
    run_differential(ring, 0, ops)


@settings(max_examples=100, deadline=None)
@given(ring=st.sampled_from([1, 2, 4]), filter_log2_bits=st.sampled_from([6, 8, 20]), ops=ops_st)
def test_differential_filter_has_no_false_negatives(
    ring: int, filter_log2_bits: int, ops: list[tuple[str, int, list[Event]]]
) -> None:
    run_differential(ring, filter_log2_bits, ops)


def test_filter_false_positives_are_rare() -> None:
    """With 2000 digests aged into 2^16 bits, digests never seen test positive about as often as
    (set bits / bits)^3 says: rarely."""
    with EvidenceSet(1, 16) as ev:
        aged = np.arange(1, 2001, dtype=np.int64) * 7919
        ev.apply(1, np.array([REMOVED_EVENT], dtype=np.uint8), np.array([0, len(aged)]), aged)
        ev.advance(1)
        kinds, _ = ev.lookup(aged)
        assert (kinds == AGED).all()
        never = -np.arange(1, 100001, dtype=np.int64) * 104729
        kinds, _ = ev.lookup(never)
        assert set(np.unique(kinds).tolist()) <= {ABSENT, AGED}
        rate = float((kinds == AGED).mean())
        expected = ev.stats().filter_false_positive_rate
        assert expected < 0.001
        assert rate <= 3 * expected + 0.0005


@pytest.mark.parametrize("filter_log2", [0, 20])
def test_expiry_spread_over_calls_never_changes_an_answer(filter_log2: int) -> None:
    """200,000 removals expire at once: the sweep out of the table takes many calls (4096 slots
    each), and meanwhile every expired digest already answers as aged (absent without a filter),
    removals and stores in between (one of them growing the table mid-sweep) answer as usual, and
    the counts are exact once stats() finishes the sweep."""
    n = 200_000
    old = list(range(1, n + 1))
    aged = AGED if filter_log2 else ABSENT
    with EvidenceSet(2, filter_log2) as ev:
        ev.advance(0)
        apply(ev, 1, (REMOVED_EVENT, tuple(old)))
        ev.advance(2)  # bucket 0 leaves the ring: all of `old` expired, almost none swept yet
        sample = old[::997]
        assert looked_up(ev, sample) == [(aged, 0)] * len(sample)
        fresh = list(range(n + 1, 3 * n + 1))  # enough to grow the table while the sweep is under way
        apply(ev, 2, (REMOVED_EVENT, tuple(fresh)), (STORED, (old[5],)), (REMOVED_EVENT, (old[7],)))
        assert looked_up(ev, [old[5], old[7], fresh[0], fresh[-1], old[6]]) == [
            (RESIDENT, 2),
            (REMOVED, 2),
            (REMOVED, 2),
            (REMOVED, 2),
            (aged, 0),
        ]
        for batch in range(3, 40):  # more calls, each sweeping a little
            apply(ev, batch)
            assert one(ev, old[batch]) == {5: (RESIDENT, 2), 7: (REMOVED, 2)}.get(batch, (aged, 0))
        stats = ev.stats()
        assert stats.expired == n - 1  # old[7] was removed again before the sweep reached it
        assert stats.evidence == len(fresh) + 1
        assert stats.filter_inserts == (n - 1 if filter_log2 else 0)
        assert looked_up(ev, sample) == [(aged, 0)] * len(sample)


def test_a_timer_sweeps_in_steps_and_trim_gives_the_memory_back() -> None:
    """sweep(budget) finishes an expiry pass in steps without changing an answer, and trim() frees
    an emptied table and shrinks one left at most a quarter full, keeping every answer."""
    n, kept = 100_000, 1_000
    with EvidenceSet(2, 16) as ev:
        ev.advance(0)
        apply(ev, 1, (REMOVED_EVENT, tuple(range(1, n + 1))))
        ev.advance(1)
        apply(ev, 2, (REMOVED_EVENT, tuple(range(1, kept + 1))))
        full = ev.stats(settle=False)
        ev.advance(2)  # bucket 0 expires: the last removal of 1..kept is in bucket 1
        with pytest.raises(ValueError, match="budget"):
            ev.sweep(-1)
        steps = 1
        while ev.sweep(10_000):
            steps += 1
        assert steps > 10
        swept = ev.stats(settle=False)
        assert (swept.evidence, swept.expired, swept.evidence_bytes) == (kept, n - kept, full.evidence_bytes)
        assert looked_up(ev, [1, kept, kept + 1, n]) == [(REMOVED, 2), (REMOVED, 2), (AGED, 0), (AGED, 0)]
        ev.trim()
        trimmed = ev.stats(settle=False)
        assert trimmed.evidence == kept and trimmed.evidence_bytes == 4096 * 12 < full.evidence_bytes
        assert looked_up(ev, [1, kept, kept + 1, n]) == [(REMOVED, 2), (REMOVED, 2), (AGED, 0), (AGED, 0)]
        ev.advance(5)
        while ev.sweep(10_000):
            pass
        ev.trim()
        assert ev.stats(settle=False).evidence_bytes == 0 and one(ev, 1) == (AGED, 0)
