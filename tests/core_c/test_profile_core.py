"""core_c.ProfileRecorder (lh_profile.h) fed beside a real core_c.Lane: golden values on hand-made
traces (reuse times, per-key first/last/category/shared/reuses, hits by threshold, windows, hits
per request; repeated keys in a request; a TTL lane; the category split), the error mapping
(CoreError subclasses with ``index`` and ``partial``, the recorder unchanged by the failing
request), the writable ``ns`` view, argument checks and lifecycle, and a hypothesis differential
test against the pure-Python naive computation below (nothing shared with the engine)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import NaiveLru

import core_c
from core_c import BatchFacts, CoreError, CoreInvalidArgument, CoreRangeError, Lane, ProfileRecorder
from core_c.profile import CategoryReuses


@dataclass(frozen=True)
class Req:
    """One request: its time (ns), category and block keys."""

    ts: int
    cat: int
    keys: tuple[int, ...]


def flat(requests: Sequence[Req]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    keys = np.array([k for r in requests for k in r.keys], dtype=np.int64)
    offsets = np.cumsum([0] + [len(r.keys) for r in requests]).astype(np.int64)
    ts = np.array([r.ts for r in requests], dtype=np.int64)
    cats = np.array([r.cat for r in requests], dtype=np.int32)
    return keys, offsets, ts, cats


def feed(lane: Lane, rec: ProfileRecorder, requests: Sequence[Req]) -> tuple[list[int], BatchFacts]:
    """The lane processes the requests, then the recorder records them with the lane's facts."""
    keys, offsets, ts, cats = flat(requests)
    facts = lane.process_batch(keys, offsets, ts)
    hits = rec.record_batch(keys, offsets, ts, cats, facts)
    assert hits.dtype == np.int64
    assert list(hits) == [int(facts.segments[a:b, 1].sum()) for a, b in itertools.pairwise(facts.seg_offsets)]
    return [int(h) for h in hits], facts


def curves(*per_request: Sequence[tuple[int, int]]) -> BatchFacts:
    """Hand-made facts: one curve (segments) per request."""
    rows = [seg for curve in per_request for seg in curve]
    offsets = np.cumsum([0] + [len(c) for c in per_request]).astype(np.int64)
    return BatchFacts(
        np.array(rows, dtype=np.int64).reshape(-1, 2), offsets, np.zeros(len(per_request), dtype=np.uint8)
    )


def by_threshold(slope: np.ndarray) -> list[int]:
    """The hit blocks whose threshold is exactly t, t = 0, 1, ... (trailing zeros dropped); the
    difference array must come back to 0 past its end."""
    exact = [int(v) for v in np.cumsum(slope)]
    assert not exact or exact[-1] == 0, "a segment's -1 past its end is missing"
    while exact and exact[-1] == 0:
        exact.pop()
    return exact


def category_counts(rec: ProfileRecorder, category: int) -> list[int]:
    """A category's reuses per key, reconstructed as lh_profile.h describes."""
    a = rec.arrays()
    n = len(a.reuses)
    if len(a.base_reuses) == 0:  # only the base category has reused
        return [int(v) for v in a.reuses] if category == a.base_category else [0] * n
    counts = np.zeros(n, dtype=np.int64)
    if category == a.base_category:
        counts[: len(a.base_reuses)] += a.base_reuses
    counts += np.bincount(rec.reuses_of(category).keys, minlength=n)[:n]
    return [int(v) for v in counts]


def snapshot(rec: ProfileRecorder, categories: int = 12) -> dict[str, Any]:
    """Everything observable of a recorder (memory aside), as plain values."""
    a = rec.arrays()
    out: dict[str, Any] = {
        name: [int(v) for v in getattr(a, name)]
        for name in ("first_ns", "last_ns", "first_cat", "shared", "reuses", "window", "window_keys", "base_reuses")
    }
    out["by_threshold"] = by_threshold(a.threshold_slope)
    out["categories"] = a.categories
    out["base_category"] = a.base_category
    for c in range(-1, categories):
        r = rec.reuses_of(c)
        out[f"reuses_of({c})"] = ([int(v) for v in r.expanded()], [int(v) for v in r.keys])
    s = rec.stats()
    out["stats"] = (s.requests, s.accesses, s.keys, s.reuses)
    return out


# ---------------------------------------------------------------------------------------------
# golden traces

# keys 1..5 get indexes 0..4; window 10 ns
GOLDEN = [
    Req(0, 0, (1, 2, 3)),  # cold
    Req(5, 0, (1, 2, 4)),  # (1,2): 1 and 2 after 5
    Req(12, 1, (1, 2, 3)),  # (1,2)(4,1): 1, 2 after 7, 3 after 12; the second category reuses
    Req(13, 0, (1, 5)),  # (1,1): 1 after 1
    Req(25, 1, (1, 5)),  # (1,2): 1 and 5 after 12
]


def check_golden(rec: ProfileRecorder, hits: list[int]) -> None:
    assert hits == [0, 2, 3, 1, 2]
    a = rec.arrays()
    assert list(a.first_ns) == [0, 0, 0, 5, 13]
    assert list(a.last_ns) == [25, 12, 12, 5, 25]
    assert list(a.first_cat) == [0, 0, 0, 0, 0]
    assert list(a.shared) == [1, 1, 1, 0, 1]
    assert list(a.reuses) == [4, 2, 1, 0, 1]
    assert by_threshold(a.threshold_slope) == [0, 4, 3, 0, 1]
    assert list(a.window) == [0, 1, 2]
    assert list(a.window_keys) == [4, 4, 2]
    assert a.categories >= 2
    assert a.base_category == 0
    assert list(a.base_reuses) == [1, 1, 0, 0]
    r0, r1 = rec.reuses_of(0), rec.reuses_of(1)
    assert isinstance(r0, CategoryReuses)
    assert list(r0.expanded()) == [5, 5, 1] and (list(r0.ns), list(r0.runs), r0.n) == ([5, 1], [2, 1], 3)
    assert list(r0.keys) == [0]
    assert list(r1.expanded()) == [7, 7, 12, 12, 12] and (list(r1.ns), list(r1.runs)) == ([7, 12], [2, 3])
    assert list(r1.keys) == [0, 1, 2, 0, 4]
    assert r0.ns.dtype == np.int64 and r0.runs.dtype == r0.keys.dtype == np.uint32
    assert category_counts(rec, 0) == [2, 1, 0, 0, 0]
    assert category_counts(rec, 1) == [2, 1, 1, 0, 1]
    s = rec.stats()
    assert (s.requests, s.accesses, s.keys, s.reuses) == (5, 13, 5, 8)
    assert s.memory_bytes > 0


def test_golden_one_batch() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        assert rec.window_ns == 10
        a = rec.arrays()
        assert len(a.first_ns) == 0 and len(a.window) == 0 and a.base_category == -1 and len(a.base_reuses) == 0
        hits, facts = feed(lane, rec, GOLDEN)
        assert [facts.curve(i) for i in range(5)] == [(), ((1, 2),), ((1, 2), (4, 1)), ((1, 1),), ((1, 2),)]
        check_golden(rec, hits)


def test_golden_request_by_request_equals_one_batch() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        hits = [h for r in GOLDEN for h in feed(lane, rec, [r])[0]]
        check_golden(rec, hits)


def test_before_a_second_category_reuses_the_counts_are_the_base_categorys() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        feed(lane, rec, GOLDEN[:2])
        a = rec.arrays()
        assert a.base_category == 0 and len(a.base_reuses) == 0
        r = rec.reuses_of(0)
        assert list(r.expanded()) == [5, 5] and len(r.keys) == 0
        assert category_counts(rec, 0) == [1, 1, 0, 0]


def test_repeated_keys_in_a_request() -> None:
    """Reuse times against the state before the request; windows count a key once; an access is
    a request containing the key."""
    trace = [Req(0, 0, (1, 2)), Req(10, 0, (1, 1, 2)), Req(15, 0, (2, 2, 1)), Req(20, 0, (3, 3)), Req(30, 0, (3,))]
    with Lane() as lane, ProfileRecorder(window_ns=100) as rec:
        hits, _ = feed(lane, rec, trace)
        assert hits == [0, 3, 3, 0, 1]
        a = rec.arrays()
        assert list(a.first_ns) == [0, 0, 20]
        assert list(a.last_ns) == [15, 15, 30]
        assert list(a.shared) == [1, 1, 1]
        assert list(a.reuses) == [3, 3, 1]
        assert list(a.window) == [0] and list(a.window_keys) == [3]
        assert by_threshold(a.threshold_slope) == [0, 2, 2, 2, 1]
        assert list(rec.reuses_of(0).expanded()) == [10, 10, 10, 5, 5, 5, 10]
        s = rec.stats()
        assert (s.requests, s.accesses, s.keys, s.reuses) == (5, 11, 3, 7)
    with Lane() as lane, ProfileRecorder(window_ns=100) as rec:
        feed(lane, rec, [Req(4, 3, (9, 9, 9))])
        a = rec.arrays()
        assert list(a.shared) == [0] and list(a.first_cat) == [3] and list(a.window_keys) == [1]


def test_ttl_lane_expired_block_is_no_reuse() -> None:
    trace = [Req(0, 0, (1, 2)), Req(10, 1, (1, 2)), Req(15, 1, (1, 2)), Req(30, 2, (2, 1)), Req(31, 0, (2,))]
    with Lane(ttl_ns=10) as lane, ProfileRecorder(window_ns=1000) as rec:
        hits, _ = feed(lane, rec, trace)
        assert hits == [0, 0, 2, 0, 1]
        a = rec.arrays()
        assert list(a.last_ns) == [30, 31]
        assert list(a.shared) == [1, 1]
        assert list(a.reuses) == [1, 2]
        assert a.base_category == 1
        assert list(rec.reuses_of(1).expanded()) == [5, 5]
        assert list(rec.reuses_of(0).expanded()) == [1] and list(rec.reuses_of(0).keys) == [1]
        assert len(rec.reuses_of(2).ns) == rec.reuses_of(2).n == 0
        assert category_counts(rec, 1) == [1, 1]
        assert category_counts(rec, 0) == [0, 1]


def test_windows_of_negative_times_and_empty_requests() -> None:
    trace = [Req(-15, 0, ()), Req(-10, 0, (2, 1)), Req(-1, 0, (3,)), Req(0, 0, ()), Req(0, 0, (4, 4)), Req(29, 0, (1,))]
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        hits, _ = feed(lane, rec, trace)
        a = rec.arrays()
        assert list(a.window) == [-2, -1, 0, 2]
        assert list(a.window_keys) == [0, 3, 1, 1]
        assert hits[-1] == 1 and list(rec.reuses_of(0).expanded()) == [39]


# ---------------------------------------------------------------------------------------------
# errors: two good requests, then a bad one; the good ones are recorded, the bad one changes nothing

PREFIX = [Req(100, 0, (1, 2, 3)), Req(110, 0, (1, 2))]
PREFIX_FACTS = curves((), ((1, 2),))
GOOD = [Req(120, 0, (1, 4)), Req(130, 0, (2, 5)), Req(1000, 1, (1, 2, 3, 6))]
GOOD_CURVES: list[tuple[tuple[int, int], ...]] = [((1, 1),), ((1, 1),), ((1, 1), (3, 2))]


def fresh(window_ns: int = 100) -> ProfileRecorder:
    rec = ProfileRecorder(window_ns)
    rec.record_batch(*flat(PREFIX), PREFIX_FACTS)
    return rec


BAD_REQUESTS = {
    "timestamp backwards": (Req(125, 1, (1, 2, 3, 6)), ((1, 1), (3, 2))),
    "negative category": (Req(1000, -1, (1, 2, 3, 6)), ((1, 1), (3, 2))),
    "start 0": (Req(1000, 1, (1, 2, 3, 6)), ((0, 2),)),
    "start negative": (Req(1000, 1, (1, 2, 3, 6)), ((-3, 1),)),
    "thresholds overlap": (Req(1000, 1, (1, 2, 3, 6)), ((1, 2), (2, 1))),
    "thresholds decrease": (Req(1000, 1, (1, 2, 3, 6)), ((3, 1), (1, 1))),
    "run beyond the request": (Req(1000, 1, (1, 2, 3, 6)), ((1, 2), (4, 3))),
    "negative run": (Req(1000, 1, (1, 2, 3, 6)), ((1, 2), (5, -1))),
    "run overflows": (Req(1000, 1, (1, 2, 3, 6)), ((1, 2), (3, 2**63 - 1))),
    "covers a key never seen": (Req(1000, 1, (1, 2, 3, 6)), ((1, 3), (5, 1))),
    "covers a key first seen in this request": (Req(1000, 1, (1, 7, 7, 2)), ((1, 3),)),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_bad_request_raises_with_index_and_partial_and_changes_nothing(case: str) -> None:
    bad, bad_curve = BAD_REQUESTS[case]
    requests = [*GOOD[:2], bad]
    with fresh() as rec, fresh() as ref:
        with pytest.raises(CoreInvalidArgument) as info:
            rec.record_batch(*flat(requests), curves(*GOOD_CURVES[:2], bad_curve))
        err = info.value
        assert isinstance(err, ValueError) and isinstance(err, CoreError)
        assert err.status_name == "LH_EINVAL" and err.message
        assert err.index == 2
        assert list(err.partial) == [1, 1]  # type: ignore[attr-defined]
        assert list(ref.record_batch(*flat(GOOD[:2]), curves(*GOOD_CURVES[:2]))) == [1, 1]
        assert snapshot(rec) == snapshot(ref)
        # both go on alike
        for r in (rec, ref):
            assert list(r.record_batch(*flat(GOOD[2:]), curves(GOOD_CURVES[2]))) == [3]
        assert snapshot(rec) == snapshot(ref)


@pytest.mark.parametrize("start", [2**63 - 1, 2**61 + 1, 2**40])
def test_a_threshold_too_large_to_hold_fails_cleanly(start: int) -> None:
    with fresh() as rec, fresh() as ref:
        with pytest.raises(CoreError) as info:
            rec.record_batch(*flat(GOOD), curves(*GOOD_CURVES[:2], ((1, 1), (start, 1))))
        assert info.value.index == 2
        ref.record_batch(*flat(GOOD[:2]), curves(*GOOD_CURVES[:2]))
        assert snapshot(rec) == snapshot(ref)


def test_a_timestamp_below_the_previous_batch_fails_at_index_0() -> None:
    with fresh() as rec, fresh() as ref:
        with pytest.raises(CoreInvalidArgument) as info:
            rec.record_batch(*flat([Req(109, 0, (1,))]), curves(((1, 1),)))
        assert info.value.index == 0 and len(info.value.partial) == 0  # type: ignore[attr-defined]
        assert snapshot(rec) == snapshot(ref)
        assert list(rec.record_batch(*flat([Req(110, 0, (1,))]), curves(((1, 1),)))) == [1]


def test_timestamps_more_than_int64_apart_are_refused() -> None:
    """A reuse time (or a lifespan) is at most the span from the first request: 2^63 - 1 ns is
    recorded, one nanosecond more is refused before anything changes."""
    first = -(2**63) + 5
    with ProfileRecorder(1000) as rec:
        assert list(
            rec.record_batch(*flat([Req(first, 0, (7,)), Req(first + 2**63 - 1, 0, (7,))]), curves((), ((1, 1),)))
        ) == [0, 1]
        with pytest.raises(CoreRangeError, match="more than 2\\^63 - 1 ns after the first request's") as info:
            rec.record_batch(*flat([Req(first + 2**63, 0, (7,))]), curves(((1, 1),)))
        assert info.value.index == 0
        reuses = rec.reuses_of(0)
        assert reuses.expanded().tolist() == [2**63 - 1]
        assert rec.arrays().last_ns.tolist() == [first + 2**63 - 1]


def test_window_must_be_positive() -> None:
    for window_ns in (0, -1):
        with pytest.raises(CoreInvalidArgument):
            ProfileRecorder(window_ns)


def test_reuses_of_a_category_without_reuses_is_empty() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        for c in (0, 3, -1, 2**31 - 1):
            r = rec.reuses_of(c)
            assert len(r.ns) == 0 and len(r.keys) == 0
        feed(lane, rec, [*GOLDEN, Req(30, 4, (8, 9))])  # category 4 only misses
        for c in (2, 3, 4, 7, -1, 2**31 - 1):
            r = rec.reuses_of(c)
            assert len(r.ns) == 0 and len(r.keys) == 0
            assert r.ns.dtype == np.int64 and r.keys.dtype == np.uint32
        assert category_counts(rec, 4) == [0] * 7


def test_reuse_runs_are_read_only_and_go_on_across_batches() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        feed(lane, rec, GOLDEN[:3])
        r = rec.reuses_of(1)
        assert not r.ns.flags.writeable and not r.runs.flags.writeable
        assert (list(r.ns), list(r.runs), r.n) == ([7, 12], [2, 1], 3)
        hits, _ = feed(lane, rec, GOLDEN[3:])  # GOLDEN[4] reuses after 12 again: the run goes on
        assert hits == [1, 2]
        r = rec.reuses_of(1)
        assert (list(r.ns), list(r.runs), r.n) == ([7, 12], [2, 3], 5)
        assert list(rec.reuses_of(1).keys) == [0, 1, 2, 0, 4]
        assert list(rec.reuses_of(0).expanded()) == [5, 5, 1]
        a = rec.arrays()
        assert list(a.reuses) == [4, 2, 1, 0, 1]
        assert category_counts(rec, 1) == [2, 1, 1, 0, 1]


def test_reset_forgets_everything_and_the_recorder_is_reused() -> None:
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        feed(lane, rec, GOLDEN)
        rec.reset()
        a = rec.arrays()
        assert len(a.first_ns) == 0 and len(a.window) == 0 and a.base_category == -1
        assert by_threshold(a.threshold_slope) == []
        assert len(a.base_reuses) == 0 and len(rec.reuses_of(0).ns) == 0 and len(rec.reuses_of(1).ns) == 0
        s = rec.stats()
        assert (s.requests, s.accesses, s.keys, s.reuses) == (0, 0, 0, 0)
        with pytest.raises(CoreInvalidArgument):  # key 1 is forgotten
            rec.record_batch(*flat([Req(0, 0, (1,))]), curves(((1, 1),)))
        lane.reset()
        hits, _ = feed(lane, rec, GOLDEN)  # times start again at 0
        check_golden(rec, hits)


def test_mismatched_lengths_raise_value_error() -> None:
    keys, offsets, ts, cats = flat(GOLDEN)
    with Lane() as lane, ProfileRecorder(window_ns=10) as rec:
        facts = lane.process_batch(keys, offsets, ts)
        bad_calls = [
            (keys, offsets, ts[:-1], cats, facts),
            (keys, offsets, ts, np.append(cats, 0).astype(np.int32), facts),
            (keys, offsets, ts, cats, BatchFacts(facts.segments, facts.seg_offsets[:-1], facts.cuts[:-1])),
            (keys, offsets[:0], ts[:0], cats[:0], facts),
            (keys, np.array([0, 3, 2, 9, 11, 13]), ts, cats, facts),
            (keys[:-1], offsets, ts, cats, facts),
            (keys, offsets, ts, cats, BatchFacts(facts.segments[:-1], facts.seg_offsets, facts.cuts)),
        ]
        for call in bad_calls:
            with pytest.raises(ValueError) as info:
                rec.record_batch(*call)
            assert not isinstance(info.value, CoreError)
        assert rec.stats().requests == 0
        check_golden(rec, list(rec.record_batch(keys, offsets, ts, cats, facts)))


def test_closed_recorder_raises_value_error() -> None:
    rec = ProfileRecorder(10)
    rec.close()
    rec.close()
    assert rec.closed
    keys, offsets, ts, cats = flat(GOLDEN[:1])
    for call in (
        lambda: rec.record_batch(keys, offsets, ts, cats, curves(())),
        rec.arrays,
        lambda: rec.reuses_of(0),
        rec.stats,
        rec.reset,
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_exported_from_core_c() -> None:
    assert core_c.ProfileRecorder is ProfileRecorder
    assert core_c.ProfileArrays is core_c.profile.ProfileArrays


# ---------------------------------------------------------------------------------------------
# differential: random small traces against a naive computation


@dataclass
class NaiveProfile:
    """The recorder's state, from the header's definitions, with dicts and lists."""

    window_ns: int
    index: dict[int, int] = field(default_factory=dict)
    first: list[int] = field(default_factory=list)
    last: list[int] = field(default_factory=list)
    first_cat: list[int] = field(default_factory=list)
    containing: list[int] = field(default_factory=list)
    reuses: list[int] = field(default_factory=list)
    by_threshold: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    windows: dict[int, set[int]] = field(default_factory=dict)
    base: int = -1
    base_reuses: list[int] | None = None
    ns: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    keys: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    count: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    requests: int = 0
    accesses: int = 0

    def record(self, req: Req, curve: Sequence[tuple[int, int]]) -> int:
        hit_blocks = sum(run for _, run in curve)
        for key in req.keys[:hit_blocks]:
            k = self.index[key]  # accessed by an earlier request
            if self.base < 0:
                self.base = req.cat
            if req.cat != self.base and self.base_reuses is None:
                self.base_reuses = list(self.reuses)
            self.ns[req.cat].append(req.ts - self.last[k])
            if self.base_reuses is not None:
                self.keys[req.cat].append(k)
            self.reuses[k] += 1
            self.count[req.cat][k] += 1
        for start, run in curve:
            for t in range(start, start + run):
                self.by_threshold[t] += 1
        window = self.windows.setdefault(req.ts // self.window_ns, set())
        for key in dict.fromkeys(req.keys):
            if key not in self.index:
                self.index[key] = len(self.first)
                self.first.append(req.ts)
                self.last.append(req.ts)
                self.first_cat.append(req.cat)
                self.containing.append(0)
                self.reuses.append(0)
            k = self.index[key]
            self.last[k] = req.ts
            self.containing[k] += 1
            window.add(k)
        self.requests += 1
        self.accesses += len(req.keys)
        return hit_blocks

    def check(self, rec: ProfileRecorder) -> None:
        a = rec.arrays()
        assert list(a.first_ns) == self.first
        assert list(a.last_ns) == self.last
        assert list(a.first_cat) == self.first_cat
        assert list(a.shared) == [int(n >= 2) for n in self.containing]
        assert list(a.reuses) == self.reuses
        top = max(self.by_threshold, default=0)
        assert by_threshold(a.threshold_slope) == (
            [self.by_threshold.get(t, 0) for t in range(top + 1)] if self.by_threshold else []
        )
        assert list(a.window) == sorted(self.windows)
        assert list(a.window_keys) == [len(self.windows[w]) for w in sorted(self.windows)]
        assert a.base_category == self.base
        if self.base_reuses is None:
            assert len(a.base_reuses) == 0
        else:
            got, want = [int(v) for v in a.base_reuses], list(self.base_reuses)
            assert len(got) <= len(self.first)
            size = max(len(got), len(want))  # keys first seen after the snapshot count 0 either way
            assert got + [0] * (size - len(got)) == want + [0] * (size - len(want))
        for c in {*self.ns, 0, 1, 2, 5, 9, 31}:
            r = rec.reuses_of(c)
            assert list(r.expanded()) == self.ns.get(c, [])
            assert r.n == sum(int(n) for n in r.runs) == len(self.ns.get(c, []))
            assert all(n >= 1 for n in r.runs) and all(r.ns[1:] != r.ns[:-1])  # maximal runs
            assert list(r.keys) == self.keys.get(c, [])
            if self.ns.get(c):
                assert c < a.categories
            assert category_counts(rec, c) == [self.count[c][k] for k in range(len(self.first))]
        s = rec.stats()
        assert (s.requests, s.accesses, s.keys, s.reuses) == (
            self.requests,
            self.accesses,
            len(self.first),
            sum(self.reuses),
        )


KEYS = (0, 1, -1, 2, 3, 4, 2**63 - 1, -(2**63), 123456789012345)


@st.composite
def traces(draw: st.DrawFn) -> tuple[int, int, list[Req], list[int]]:
    ttl = draw(st.sampled_from([0, 0, 2, 5]))
    window_ns = draw(st.sampled_from([1, 3, 10, 10**6]))
    n = draw(st.integers(1, 40))
    # times near zero, and at the ends of int64 (the window's start below INT64_MIN; 40 requests
    # advance at most 120 ns)
    now = draw(st.one_of(st.integers(-20, 20), st.sampled_from([-(2**63), -(2**63) + 7, 2**63 - 130])))
    requests = []
    for _ in range(n):
        now += draw(st.integers(0, 3))
        keys = draw(st.lists(st.sampled_from(KEYS), max_size=5))
        requests.append(Req(now, draw(st.sampled_from([0, 0, 1, 2, 5, 9])), tuple(keys)))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    return ttl, window_ns, requests, cuts


@settings(max_examples=300, deadline=None)
@given(traces(), st.booleans())
def test_differential_against_naive(trace: tuple[int, int, list[Req], list[int]], numbered: bool) -> None:
    """numbered: the lane numbers its keys and the recorder records by those numbers."""
    ttl, window_ns, requests, cuts = trace
    naive = NaiveProfile(window_ns)
    lru = NaiveLru(None, ttl)
    bounds = [0, *cuts, len(requests)]
    with Lane(ttl, key_ids=numbered) as lane, ProfileRecorder(window_ns) as rec:
        for lo, hi in itertools.pairwise(bounds):
            batch = requests[lo:hi]
            hits, facts = feed(lane, rec, batch)
            for i, req in enumerate(batch):
                assert naive.record(req, facts.curve(i)) == hits[i] == lru.request(req.keys, req.ts)
            naive.check(rec)
        naive.check(rec)


def test_key_numbers_are_first_sight_order_and_a_recorder_takes_one_kind_for_good() -> None:
    requests = [Req(1, 0, (7, 8, 7)), Req(2, 1, (8, 9)), Req(3, 0, (7, 8, 9, 10))]
    keys, offsets, ts, cats = flat(requests)
    with Lane(0, key_ids=True) as lane, ProfileRecorder(10) as by_number, ProfileRecorder(10) as by_key:
        facts = lane.process_batch(keys, offsets, ts)
        assert facts.key_ids is not None and list(facts.key_ids) == [0, 1, 0, 1, 2, 0, 1, 2, 3]
        assert list(by_number.record_batch(keys, offsets, ts, cats, facts)) == [0, 1, 3]
        plain = BatchFacts(facts.segments, facts.seg_offsets, facts.cuts)
        assert list(by_key.record_batch(keys, offsets, ts, cats, plain)) == [0, 1, 3]
        a, b = by_number.arrays(), by_key.arrays()
        for name in ("first_ns", "last_ns", "first_cat", "shared", "reuses", "threshold_slope", "window_keys"):
            assert list(getattr(a, name)) == list(getattr(b, name)), name
        later = np.array([4], dtype=np.int64)
        one, one_offsets = np.array([7], dtype=np.int64), np.array([0, 1], dtype=np.int64)
        no_hit = curves(())

        def numbers(*ids: int) -> BatchFacts:
            return BatchFacts(no_hit.segments, no_hit.seg_offsets, no_hit.cuts, np.array(ids, np.uint32))

        with pytest.raises(CoreInvalidArgument, match="fed key numbers: it cannot take keys") as err:
            by_number.record_batch(one, one_offsets, later, cats[:1], no_hit)
        assert err.value.index == 0
        with pytest.raises(CoreInvalidArgument, match="fed keys: it cannot take key numbers"):
            by_key.record_batch(one, one_offsets, later, cats[:1], numbers(0))
        with pytest.raises(
            CoreInvalidArgument, match=r"block 0's key number 9 skips numbers \(the next new key is number 4\)"
        ):
            by_number.record_batch(one, one_offsets, later, cats[:1], numbers(9))
        with pytest.raises(ValueError, match="one uint32 per key"):
            by_number.record_batch(one, one_offsets, later, cats[:1], numbers(0, 1))
        assert by_number.stats().requests == 3


def test_an_error_at_the_first_reuse_leaves_no_base_category() -> None:
    """The first reuse of all fails after two good blocks (key 9 was never seen)."""
    with ProfileRecorder(100) as rec, ProfileRecorder(100) as ref:
        first = [Req(5, 0, (1, 2, 3))]
        ref.record_batch(*flat(first), curves(()))
        with pytest.raises(CoreInvalidArgument) as info:
            rec.record_batch(*flat([*first, Req(500, 3, (1, 2, 9, 8))]), curves((), ((1, 1), (2, 1), (3, 1))))
        assert info.value.index == 1 and list(info.value.partial) == [0]  # type: ignore[attr-defined]
        assert snapshot(rec) == snapshot(ref)
        assert rec.arrays().base_category == -1
        assert list(rec.record_batch(*flat([Req(500, 3, (1, 2))]), curves(((1, 1), (2, 1))))) == [2]
        a = rec.arrays()
        assert a.base_category == 3 and len(a.base_reuses) == 0 and list(a.reuses) == [1, 1, 0]
        assert category_counts(rec, 3) == [1, 1, 0]


# ---------------------------------------------------------------------------------------------
# tally (lh_tally_i64): the distinct values and their counts, against a plain Counter


def naive_tally(values: Sequence[int]) -> tuple[list[int], list[int]]:
    counts: dict[int, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    ordered = sorted(counts)
    return ordered, [counts[v] for v in ordered]


@settings(max_examples=200, deadline=None, database=None)
@given(
    values=st.lists(
        st.one_of(
            st.integers(-3, 3),
            st.sampled_from([-(2**63), 2**63 - 1, 2**62, -(2**31)]),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=300,
    ),
    runs=st.booleans(),
)
def test_tally_is_the_distinct_values_and_their_counts(values: list[int], runs: bool) -> None:
    if runs:  # runs of equal values, as a request's reuse times come
        values = [v for v in values for _ in range(1 + abs(v) % 3)]
    want = naive_tally(values)
    found = core_c.profile.tally(np.array(values, dtype=np.int64), max(1, len(values)))
    assert found is not None
    got_values, got_counts, total = found
    assert got_values.dtype == got_counts.dtype == np.int64
    assert (got_values.tolist(), got_counts.tolist()) == want
    assert total == sum(values)  # exact: no wrap-around at the int64 extremes


@settings(max_examples=150, deadline=None, database=None)
@given(
    runs=st.lists(
        st.tuples(
            st.one_of(st.integers(-3, 3), st.sampled_from([-(2**63), 2**63 - 1]), st.integers(-(2**63), 2**63 - 1)),
            st.one_of(st.integers(1, 4), st.sampled_from([2**32 - 1, 2**31])),
        ),
        max_size=60,
    )
)
def test_weighted_tally_counts_each_value_its_weight_times(runs: list[tuple[int, int]]) -> None:
    counts: dict[int, int] = defaultdict(int)
    for v, w in runs:
        counts[v] += w
    values = np.array([v for v, _ in runs], dtype=np.int64)
    weights = np.array([w for _, w in runs], dtype=np.uint32)
    found = core_c.profile.tally(values, len(values), weights=weights)
    assert found is not None
    got_values, got_counts, total = found
    assert got_values.tolist() == sorted(counts)
    assert got_counts.tolist() == [counts[v] for v in sorted(counts)]
    assert total == sum(v * w for v, w in runs)
    with pytest.raises(ValueError, match="one entry per value"):
        core_c.profile.tally(values, len(values), weights=weights[:-1] if len(weights) else np.ones(1, np.uint32))


@pytest.mark.parametrize("bad", [[0], [-1], [2**32], [1.0]])
def test_weights_out_of_range_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="integers from 1 to 2\\^32 - 1"):
        core_c.profile.tally(np.array([5], dtype=np.int64), 1, weights=np.array(bad))


def test_tally_refuses_more_distinct_values_than_its_room() -> None:
    values = np.array([5, 1, 5, 2, 1, 7, 7, 7], dtype=np.int64)  # 4 distinct
    found = core_c.profile.tally(values, 4)
    assert found is not None and found[0].tolist() == [1, 2, 5, 7] and found[1].tolist() == [2, 1, 2, 3]
    assert found[2] == 35
    assert core_c.profile.tally(values, 3) is None
    assert core_c.profile.tally(values, 0) is None
    empty = core_c.profile.tally(np.empty(0, dtype=np.int64), 0)
    assert empty is not None and len(empty[0]) == len(empty[1]) == 0 and empty[2] == 0


def test_tally_of_many_values_grows_its_map() -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(-(10**12), 10**12, size=50_000)
    values[::3] = values[0]  # one value repeated, apart from its runs
    want_values, want_counts = np.unique(values, return_counts=True)
    found = core_c.profile.tally(values, len(values))
    assert found is not None
    assert np.array_equal(found[0], want_values) and np.array_equal(found[1], want_counts)
    assert found[2] == sum(values.tolist())
    assert core_c.profile.tally(values, len(want_values) - 1) is None
