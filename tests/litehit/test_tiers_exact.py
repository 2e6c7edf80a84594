"""The tier split (litehit.tiers) against a naive multi-tier LRU (tests/support/tiers_oracle.py),
request by request and tier by tier.

The engine derives each tier's hits from the facts alone (one recency order sliced by cumulative
capacity, or one LRU per inclusive capacity); the oracle simulates explicit per-tier LRU lists
with promote-on-hit / demote-on-evict (exclusive) or write-through (inclusive). Traces are random
prefix trees (requests share prefixes, branch, come back to old branches, vary in length) on a
config of several lanes: prefix-hashed lanes, a lane re-blocked to twice the trace block, lanes
with a TTL (timestamps spread so blocks expire) and a lane of unhashed node ids. The oracle is
first proven on hand-made traces worked out by hand, then it judges the engine.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import config, group, instance, write_rows
from pydantic import ValidationError
from tiers_oracle import (
    Capacity,
    ExclusiveTiers,
    InclusiveTiers,
    LaneRows,
    capacity_in_blocks,
    naive_prefill,
    naive_tier_sums,
    nearest_rank,
    simulate,
)

from litehit.capacity import parse_capacities
from litehit.jobs.replay import run_replay
from litehit.spec import parse_replay_spec
from litehit.tiers.config import TierError, TierMode
from litehit.tiers.document import tiers_document
from litehit.tiers.lanes import LaneFacts, load_lanes
from litehit.tiers.options import TiersOptions
from litehit.tiers.split import served_blocks

NS = 10**9
TRACE_BLOCK = 4
INF = None
SEEDS = (11, 23, 47)


# ---------------------------------------------------------------------------------------------
# the oracle proven by hand


def test_oracle_exclusive_by_hand() -> None:
    # capacities 1, 1, inf; commit tail to head, a touched key enters T1, victims move down:
    #  [a,b,c] cold; touch c: T1 c; b: T1 b, T2 c; a: T1 a, T2 b, T3 c
    #  [a,b,c] a in T1, b in T2, c in T3 -> 1,1,1 (the commit restores the same layout)
    #  [d]     cold; T1 d, T2 a, T3 b c
    #  [a,b]   a in T2, b in T3 -> 0,1,1
    sim = ExclusiveTiers([1, 1, INF])
    got = [sim.request(list(keys), 0) for keys in ("abc", "abc", "d", "ab")]
    assert got == [[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]]
    assert sim.resident() == [["a"], ["b"], ["d", "c"]]
    # a last tier of 2 drops its LRU victim; a 0-block tier holds nothing and passes everything down
    sim = ExclusiveTiers([0, 1, 2])
    got = [sim.request(list(keys), 0) for keys in ("abcd", "abcd")]
    assert got == [[0, 0, 0], [0, 1, 2]]  # d was dropped: the prefix stops there
    assert sim.resident() == [[], ["a"], ["b", "c"]]
    # T1 larger than T2: 3, 1, inf
    sim = ExclusiveTiers([3, 1, INF])
    got = [sim.request(list(keys), 0) for keys in ("abcde", "abcde", "xy", "abcde")]
    # after the first: T1 a b c, T2 d, T3 e; after xy: T1 x y a, T2 b, T3 c d e
    assert got == [[0, 0, 0], [3, 1, 1], [0, 0, 0], [1, 1, 3]]


def test_oracle_inclusive_by_hand() -> None:
    # capacities 1, 2, inf, every tier sees every touch:
    #  [a,b,c] T1 a, T2 a b, T3 a b c
    #  [a,b,c] served by T1, T2, T3 -> 1,1,1
    #  [d]     T1 d, T2 d a, T3 d a b c
    #  [a,b]   a first in T2, b first in T3 -> 0,1,1
    sim = InclusiveTiers([1, 2, INF])
    got = [sim.request(list(keys), 0) for keys in ("abc", "abc", "d", "ab")]
    assert got == [[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]]
    assert sim.resident() == [["a"], ["a", "b"], ["a", "b", "d", "c"]]


def test_oracle_ttl_by_hand() -> None:
    # TTL 10 s, exclusive 1, inf: alive iff now - last < ttl (dead at exactly ttl)
    #   0 s [a,b] cold
    #   5 s [a,b] a in T1, b in T2 (5 s old)
    #  15 s [a]   a is exactly 10 s old: expired, no hit; revived at 15 s
    #  16 s [a,b] a alive (1 s), b 11 s old: expired, ends the prefix
    #  17 s [a,b] both alive again (b revived at 16 s)
    for drop in (False, True):
        sim = ExclusiveTiers([1, INF], 10 * NS, drop_expired=drop)
        got = [sim.request(list(keys), s * NS) for keys, s in (("ab", 0), ("ab", 5), ("a", 15), ("ab", 16), ("ab", 17))]
        assert got == [[0, 0], [1, 1], [0, 0], [1, 0], [1, 1]]
    # an expired key before a live one truncates the prefix (the live one is not a hit)
    sim = ExclusiveTiers([INF], 10 * NS)
    assert [sim.request(list(k), s * NS) for k, s in (("ab", 0), ("b", 8), ("ab", 12))] == [[0], [1], [0]]


def test_oracle_expired_keys_keep_their_place_or_not_alike() -> None:
    """Expired keys left in the lists (deepest in recency) never change where the alive keys
    sit: the oracle with and without purging gives the same split, on random TTL traces."""
    for seed in range(20):
        rng = random.Random(seed)
        paths = tree_paths(rng, 80, 10, 3)
        times = spread_times(rng, len(paths), (0, 0, 1, 2, 3, 6))
        keys = [[tuple(p[: j + 1]) for j in range(len(p))] for p in paths]
        for caps in [(2, 3, INF), (5, 0, 4), (1, 1, 1, 1), (0, 7)]:
            for inclusive in (False, True):
                if inclusive and list(caps) != sorted(caps, key=lambda c: float("inf") if c is None else c):
                    continue
                kept = simulate(keys, times, caps, inclusive=inclusive, ttl_ns=3 * NS)
                dropped = simulate(keys, times, caps, inclusive=inclusive, ttl_ns=3 * NS, drop_expired=True)
                assert kept == dropped, (seed, caps, inclusive)


# ---------------------------------------------------------------------------------------------
# random prefix-tree traces on a multi-lane config


def tree_paths(rng: random.Random, n: int, max_len: int, alphabet: int) -> list[list[int]]:
    """n requests of a prefix tree, each a path of labels from the root: a fresh root now and
    then, else a prefix (any length, possibly whole) of an earlier request (recent or old)
    extended by a few labels of a small alphabet (so extensions often rejoin existing
    branches); 1 to max_len blocks."""
    out: list[list[int]] = []
    roots = 0
    for _ in range(n):
        if not out or rng.random() < 0.15:
            roots += 1
            base = [1000 + roots]
        else:
            earlier = out[-rng.randint(1, min(len(out), 4))] if rng.random() < 0.6 else rng.choice(out)
            base = earlier[: rng.randint(1, len(earlier))]
        path = base + [rng.randrange(alphabet) for _ in range(rng.choice((0, 0, 1, 2, 3, 5, 8)))]
        out.append(path[: rng.randint(max(1, min(len(base), max_len) - 1), max_len)])
    return out


def spread_times(rng: random.Random, n: int, gaps_s: Sequence[float]) -> list[int]:
    """Non-decreasing timestamps (ns), gaps drawn from gaps_s (zeros: equal timestamps)."""
    t, out = NS, []
    for _ in range(n):
        out.append(t)
        t += int(rng.choice(gaps_s) * NS)
    return out


@dataclass(frozen=True)
class Lane:
    instance_id: str
    block_size: int  # a multiple of TRACE_BLOCK: re-blocked lanes keep every k-th key
    sizes: tuple[int, ...]  # block bytes = their sum
    ttl_s: int
    prefix_hash: bool
    requests: int
    gaps_s: tuple[float, ...]

    @property
    def block_bytes(self) -> int:
        return sum(self.sizes)


LANES = (
    Lane("hashed", 4, (8192, 8192), 0, True, 150, (0, 1)),
    Lane("reblocked-ttl", 8, (3000,), 8, True, 120, (0, 0.5, 1, 2, 3, 12)),
    Lane("nodes-ttl", 4, (1000, 24), 2, False, 120, (0, 0, 0.5, 1, 3)),
)


@dataclass
class Replayed:
    facts: Path
    lanes: dict[str, LaneRows]  # the oracle's view, by instance id
    ttl_ns: dict[str, int]


def lane_keys(path: Sequence[int], node_ids: dict[tuple[int, ...], int], lane: Lane) -> list[Any]:
    """The keys the lane's cache sees: prefix tuples (prefix hash) or the tree's node ids (each
    node's own id stands for its whole path, unhashed); every k-th for a re-blocked lane."""
    if lane.prefix_hash:
        keys: list[Any] = [tuple(path[: j + 1]) for j in range(len(path))]
    else:
        keys = [node_ids[tuple(path[: j + 1])] for j in range(len(path))]
    k = lane.block_size // TRACE_BLOCK
    return keys[k - 1 :: k]


@cache
def replayed(seed: int, root: Path) -> Replayed:
    rng = random.Random(seed)
    folder = root / f"seed{seed}"
    folder.mkdir()
    rows: list[tuple[int, int, dict[str, Any]]] = []
    lanes: dict[str, LaneRows] = {}
    for order, lane in enumerate(LANES):
        paths = tree_paths(rng, lane.requests, 12, 3)
        times = spread_times(rng, len(paths), lane.gaps_s)
        node_ids: dict[tuple[int, ...], int] = {}
        for p in paths:
            for j in range(len(p)):
                node_ids.setdefault(tuple(p[: j + 1]), 7 + len(node_ids) * 13)
        raw = paths if lane.prefix_hash else [[node_ids[tuple(p[: j + 1])] for j in range(len(p))] for p in paths]
        lens = [len(p) * TRACE_BLOCK + rng.randrange(TRACE_BLOCK) for p in paths]
        for i, (keys, ts, n) in enumerate(zip(raw, times, lens, strict=True)):
            row = {
                "type": "request",
                "instance_id": lane.instance_id,
                "trace_id": f"{lane.instance_id}-{i}",
                "timestamp_ns": ts,
                "keys": keys,
                "input_len": n,
            }
            rows.append((ts, order, row))
        lanes[lane.instance_id] = LaneRows(
            [lane_keys(p, node_ids, lane) for p in paths], times, lens, lane.block_size, lane.block_bytes
        )
    rows.sort(key=lambda r: (r[0], r[1]))  # stable: each lane keeps its order
    trace = write_rows(folder / "trace.jsonl", [r for _, _, r in rows])
    spec = config(
        trace,
        folder,
        block_size=TRACE_BLOCK,
        groups=[group(f"g-{lane.instance_id}", lane.ttl_s, enable_prefix_hash=lane.prefix_hash) for lane in LANES],
        instances=[
            instance(lane.instance_id, lane.block_size, group=f"g-{lane.instance_id}", sizes=lane.sizes)
            for lane in LANES
        ],
    )
    run_replay(parse_replay_spec(spec))
    return Replayed(folder / "litehit_facts.csv", lanes, {lane.instance_id: lane.ttl_s * NS for lane in LANES})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiers-exact")


@pytest.fixture(scope="module")
def engine_lanes(root: Path) -> dict[int, dict[str, LaneFacts]]:
    return {seed: {lane.instance_id: lane for lane in load_lanes(replayed(seed, root).facts)} for seed in SEEDS}


def caps_text(caps: Sequence[Capacity]) -> list[str]:
    return ["inf" if c is None else f"{c}blocks" for c in caps]


def first_mismatch(
    engine: np.ndarray, want: list[list[list[int]]], rows: LaneRows, tuples: Sequence[Sequence[Capacity]]
) -> str | None:
    """Where the engine's cumulative split differs from the oracle's, with the trace up to there."""
    cumulative = np.cumsum(np.array(want, dtype=np.int64), axis=2)  # (configs, requests, tiers)
    got = engine.astype(np.int64).transpose(1, 0, 2)
    bad = np.argwhere(got != cumulative)
    if len(bad) == 0:
        return None
    c, r, _ = bad[0]
    return (
        f"capacities {tuples[c]}, request {r} (keys {rows.keys[r]}, t={rows.times[r]}): "
        f"engine cumulative {got[c, r].tolist()} != oracle {cumulative[c, r].tolist()} "
        f"(per tier {want[c][r]}); {len(bad)} mismatching cells"
    )


def check_split(
    lane: LaneFacts, rows: LaneRows, ttl_ns: int, tuples: Sequence[Sequence[Capacity]], inclusive: bool
) -> list[list[list[int]]]:
    """Engine == oracle at every request, configuration and tier (both oracle variants under a
    TTL); the oracle's per-tier split for each tuple."""
    assert lane.requests == len(rows.keys)
    assert lane.timestamp.tolist() == rows.times and lane.input_len.tolist() == rows.input_len
    assert set(lane.block_size.tolist()) == {rows.block_size} and set(lane.block_bytes.tolist()) == {rows.block_bytes}
    mode = TierMode.INCLUSIVE if inclusive else TierMode.EXCLUSIVE
    engine = served_blocks(lane, [parse_capacities(caps_text(t)) for t in tuples], mode, slice(0, lane.requests))
    assert engine.shape == (lane.requests, len(tuples), len(tuples[0]))
    variants = (False, True) if ttl_ns else (False,)
    want: list[list[list[int]]] = []
    for drop in variants:
        want = [
            simulate(rows.keys, rows.times, t, inclusive=inclusive, ttl_ns=ttl_ns, drop_expired=drop) for t in tuples
        ]
        problem = first_mismatch(engine, want, rows, tuples)
        assert problem is None, f"lane {lane.instance_id} ({'inclusive' if inclusive else 'exclusive'}): {problem}"
    return want


EXCLUSIVE_TUPLES: dict[int, list[tuple[Capacity, ...]]] = {
    1: [(0,), (6,), (INF,)],
    2: [(0, INF), (3, INF), (8, 5), (1, 1), (20, 0), (0, 0), (4, 30)],
    3: [(3, 5, INF), (0, 4, INF), (10, 2, 7), (4, 0, 6), (2, 2, 2), (1, 6, 30), (0, 0, INF), (25, 1, 1)],
    4: [(2, 3, 4, INF), (6, 0, 3, 10), (1, 1, 1, 1), (0, 0, 5, INF), (12, 4, 8, 20), (5, 5, 0, 0)],
}
INCLUSIVE_TUPLES: dict[int, list[tuple[Capacity, ...]]] = {
    1: [(0,), (6,), (INF,)],
    2: [(0, INF), (3, 3), (2, 9), (0, 0), (5, INF), (INF, INF)],
    3: [(2, 5, INF), (0, 4, 9), (3, 3, 10), (1, 1, 1), (0, 0, INF), (6, 20, 40)],
    4: [(1, 2, 3, INF), (3, 3, 10, 10), (0, 2, 2, 30), (4, 8, 16, INF)],
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_split_equals_naive_tiers(
    seed: int, inclusive: bool, root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    data = replayed(seed, root)
    lanes = engine_lanes[seed]
    assert list(lanes) == [lane.instance_id for lane in LANES]
    table = INCLUSIVE_TUPLES if inclusive else EXCLUSIVE_TUPLES
    lower_tier_hits = expired_stops = 0
    for name, rows in data.lanes.items():
        ttl = data.ttl_ns[name]
        for tuples in table.values():
            want = check_split(lanes[name], rows, ttl, tuples, inclusive)
            lower_tier_hits += sum(row[i] for split in want for row in split for i in range(1, len(row)))
        if ttl:  # the TTL matters: some lookups stop at a key that is resident but expired
            sim = InclusiveTiers([INF], ttl)
            plain = InclusiveTiers([INF])
            hits = [sim.request(k, t)[0] for k, t in zip(rows.keys, rows.times, strict=True)]
            plain_hits = [plain.request(k, t)[0] for k, t in zip(rows.keys, rows.times, strict=True)]
            expired_stops += sum(h < p for h, p in zip(hits, plain_hits, strict=True))
    assert lower_tier_hits > 0 and expired_stops > 0  # the tiers and the TTL are exercised


def test_exclusive_lower_tiers_see_promotion_and_demotion(
    root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    """A key found in T2 or T3 is promoted (its next hit comes from T1 unless pushed down again),
    and the naive split differs from a naive inclusive split of the same capacities: the
    exclusive tiers hold more than the largest of them (so the test tells the modes apart)."""
    rows = replayed(SEEDS[0], root).lanes["hashed"]
    exclusive = simulate(rows.keys, rows.times, (3, 5, INF))
    inclusive = simulate(rows.keys, rows.times, (3, 5, INF), inclusive=True)
    assert exclusive != inclusive
    assert sum(r[0] + r[1] for r in exclusive) > sum(r[0] + r[1] for r in inclusive)
    assert sum(r[2] for r in exclusive) < sum(r[2] for r in inclusive)


def replay_unhashed(folder: Path, requests: Sequence[Sequence[int]], times: Sequence[int], ttl_s: int) -> LaneFacts:
    rows = [
        {
            "type": "request",
            "instance_id": "i1",
            "trace_id": f"r{i}",
            "timestamp_ns": t,
            "keys": list(k),
            "input_len": 4 * len(k),
        }
        for i, (k, t) in enumerate(zip(requests, times, strict=True))
    ]
    trace = write_rows(folder / "trace.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, folder, groups=[group("g1", ttl_s, enable_prefix_hash=False)])))
    (lane,) = load_lanes(folder / "litehit_facts.csv")
    return lane


def test_outside_the_prefix_contract_the_split_is_a_lower_bound(tmp_path: Path) -> None:
    """Unhashed keys that repeat in a request or follow different prefixes break the contract:
    the facts carry the monotone defense's thresholds, so the split may put hits in lower tiers
    than the tiers really serve them, but never higher (never optimistic), and with an infinite
    last tier the total is exact. The smallest case: [1,2], [2], [1,2] at 1, inf: 2 is promoted
    by the second request, so the third finds 1 in T2 and 2 in T1 (naive 1, 1), while the facts
    give 2 a threshold above 1's (engine 0, 2)."""
    lane = replay_unhashed(tmp_path, [[1, 2], [2], [1, 2]], [1, 2, 3], 0)
    for mode in (TierMode.EXCLUSIVE, TierMode.INCLUSIVE):
        got = served_blocks(lane, [parse_capacities(["1blocks", "inf"])], mode, slice(0, 3))[:, 0, :]
        want = np.cumsum(
            simulate([[1, 2], [2], [1, 2]], [1, 2, 3], (1, INF), inclusive=mode is TierMode.INCLUSIVE), axis=1
        )
        assert want.tolist() == [[0, 0], [0, 1], [1, 2]]
        assert (got <= want).all() and got[:, -1].tolist() == want[:, -1].tolist()
    exclusive = [(1, 2, INF), (2, 2, 3), (0, 3, INF), (3, 1, 2), (4, 0, INF)]
    inclusive = [(1, 2, INF), (2, 2, 3), (0, 3, INF), (1, 4, 4)]
    for seed in range(4):
        rng = random.Random(seed)
        requests = [[rng.randrange(6) for _ in range(rng.randint(1, 5))] for _ in range(60)]
        times = spread_times(rng, len(requests), (0, 1, 2))
        ttl_s = seed % 2 * 3
        (tmp_path / f"s{seed}").mkdir()
        lane = replay_unhashed(tmp_path / f"s{seed}", requests, times, ttl_s)
        for is_inclusive, tuples in ((False, exclusive), (True, inclusive)):
            mode = TierMode.INCLUSIVE if is_inclusive else TierMode.EXCLUSIVE
            got = served_blocks(lane, [parse_capacities(caps_text(t)) for t in tuples], mode, slice(0, lane.requests))
            for c, t in enumerate(tuples):
                want = np.cumsum(simulate(requests, times, t, inclusive=is_inclusive, ttl_ns=ttl_s * NS), axis=1)
                engine = got[:, c, :].astype(np.int64)
                assert (engine <= want).all(), (seed, mode, t)
                if t[-1] is INF:
                    assert engine[:, -1].tolist() == want[:, -1].tolist(), (seed, mode, t)


# ---------------------------------------------------------------------------------------------
# units: bytes and tokens become whole blocks per lane, summed per tier (exclusive)


UNIT_TUPLES = [
    ["24KiB", "24KiB", "inf"],  # 1.5 blocks of 16 KiB each: 1 + 1 (not floor(3.0) = 3 of the sum)
    ["10tokens", "6tokens", "1MiB", "inf"],
    ["7000B", "30tokens", "20KiB"],
    ["0B", "3tokens", "inf"],  # less than a block: 0
]


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_units_convert_to_whole_blocks_per_lane(
    inclusive: bool, root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    mode = TierMode.INCLUSIVE if inclusive else TierMode.EXCLUSIVE
    data = replayed(SEEDS[1], root)
    checked = 0
    for name, rows in data.lanes.items():
        lane = engine_lanes[SEEDS[1]][name]
        for texts in UNIT_TUPLES:
            blocks = [capacity_in_blocks(t, rows.block_size, rows.block_bytes) for t in texts]
            ordered = [float("inf") if b is None else b for b in blocks]
            if inclusive and ordered != sorted(ordered):
                continue
            by_unit = served_blocks(lane, [parse_capacities(texts)], mode, slice(0, lane.requests))
            by_blocks = served_blocks(lane, [parse_capacities(caps_text(blocks))], mode, slice(0, lane.requests))
            assert np.array_equal(by_unit, by_blocks), (name, texts, blocks)
            check_split(lane, rows, data.ttl_ns[name], [tuple(blocks)], inclusive)
            checked += 1
    assert checked >= 6
    assert capacity_in_blocks("24KiB", 4, 16384) == 1 and capacity_in_blocks("10tokens", 8, 3000) == 1


def test_exclusive_sums_whole_blocks_per_tier(root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]) -> None:
    """24KiB + 24KiB in 16 KiB blocks is 1 + 1 = 2 blocks, not 3: it must split like 1, 1, and
    the oracle must tell 2 from 3 on this trace (else the test could not fail)."""
    rows = replayed(SEEDS[0], root).lanes["hashed"]
    lane = engine_lanes[SEEDS[0]]["hashed"]
    got = served_blocks(
        lane, [parse_capacities(["24KiB", "24KiB", "inf"])], TierMode.EXCLUSIVE, slice(0, lane.requests)
    )
    two = np.cumsum(np.array(simulate(rows.keys, rows.times, (1, 1, INF))), axis=1)
    three = np.cumsum(np.array(simulate(rows.keys, rows.times, (1, 2, INF))), axis=1)
    assert not np.array_equal(two, three)
    assert np.array_equal(got[:, 0, :].astype(np.int64), two)


# ---------------------------------------------------------------------------------------------
# the document


TIER_NAMES = ("hbm", "dram", "ssd")


def options(capacities: Sequence[str], mode: str, prefill: dict[str, Any] | None = None, **dram: Any) -> TiersOptions:
    tiers = [{"name": n, "capacity": c} for n, c in zip(TIER_NAMES, capacities, strict=True)]
    tiers[1].update(dram)
    body: dict[str, Any] = {"tiers": tiers, "mode": mode}
    if prefill is not None:
        body["prefill"] = prefill
    return TiersOptions.model_validate(body)


def assert_close(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        for key, value in want.items():
            assert key in got, f"{where}.{key} missing"
            assert_close(got[key], value, f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-300), where
    else:
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize(
    ("capacities", "mode"),
    [
        (("4blocks", "16blocks", "inf"), "exclusive"),
        (("40KiB", "12tokens", "64KiB"), "exclusive"),
        (("2blocks", "9blocks", "inf"), "inclusive"),
        (("0blocks", "5blocks", "5blocks"), "inclusive"),
    ],
)
def test_document_sums_equal_naive(
    capacities: tuple[str, ...], mode: str, root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    for seed in SEEDS[:2]:
        data = replayed(seed, root)
        doc = tiers_document(list(engine_lanes[seed].values()), options(capacities, mode))
        assert doc["mode"] == mode
        assert [t["name"] for t in doc["tiers"]] == list(TIER_NAMES)
        assert [lane["lane"] for lane in doc["lanes"]] == list(data.lanes)
        for got, (name, rows) in zip(doc["lanes"], data.lanes.items(), strict=True):
            caps = [capacity_in_blocks(c, rows.block_size, rows.block_bytes) for c in capacities]
            served = simulate(rows.keys, rows.times, caps, inclusive=mode == "inclusive", ttl_ns=data.ttl_ns[name])
            want = naive_tier_sums(rows, served, caps)
            for tier, tier_name in zip(want["tiers"], TIER_NAMES, strict=True):  # type: ignore[call-overload]
                tier["name"] = tier_name
            assert_close(got, want | {"block_size": rows.block_size, "block_bytes": rows.block_bytes}, f"{seed}.{name}")
            assert "prefill_s" not in got
            assert sum(t["hit_blocks"] for t in got["tiers"]) > 0


PREFILL = {"model": "Llama-3.1-8B", "gpu": "H100-SXM"}


@pytest.mark.parametrize("overlap", [False, True], ids=["sum", "overlap"])
@pytest.mark.parametrize("override", [False, True], ids=["preset-links", "dram-override"])
@pytest.mark.parametrize("mode", ["exclusive", "inclusive"])
def test_prefill_equals_naive_from_printed_constants(
    overlap: bool, override: bool, mode: str, root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    seed = SEEDS[2]
    data = replayed(seed, root)
    dram = {"bandwidth_bytes_per_s": 1e9, "latency_s": 0.001} if override else {}
    capacities = ("4blocks", "8blocks", "inf")
    doc = tiers_document(
        list(engine_lanes[seed].values()), options(capacities, mode, PREFILL | {"overlap": overlap}, **dram)
    )
    constants = doc["constants"]
    for key in ("active_params", "layers", "heads", "head_dim", "peak_flops", "mfu", "overlap", "links"):
        assert key in constants, key
    assert constants["overlap"] is overlap
    assert set(constants["links"]) == {"dram", "ssd"}
    if override:
        assert constants["links"]["dram"]["bandwidth_bytes_per_s"] == 1e9
        assert constants["links"]["dram"]["latency_s"] == 0.001
    loads_matter = 0
    for got, (name, rows) in zip(doc["lanes"], data.lanes.items(), strict=True):
        caps = [capacity_in_blocks(c, rows.block_size, rows.block_bytes) for c in capacities]
        served = simulate(rows.keys, rows.times, caps, inclusive=mode == "inclusive", ttl_ns=data.ttl_ns[name])
        want = naive_prefill(rows, served, constants, TIER_NAMES)
        assert_close(got["prefill_s"], want, f"{name}.prefill_s")
        no_loads = naive_prefill(rows, served, constants | {"links": _free_links(constants)}, TIER_NAMES)
        loads_matter += no_loads["mean"] != pytest.approx(want["mean"], rel=1e-9)  # type: ignore[operator]
    assert loads_matter > 0  # the links change the estimate: a wrong load term would be seen


def _free_links(constants: dict[str, Any]) -> dict[str, Any]:
    return {n: {"bandwidth_bytes_per_s": float("inf"), "latency_s": 0.0} for n in constants["links"]}


def test_overlap_differs_from_sum(root: Path, engine_lanes: dict[int, dict[str, LaneFacts]]) -> None:
    """With a slow dram link, max(compute, loads) and compute + loads differ: the two prefill
    tests above check different numbers."""
    lanes = list(engine_lanes[SEEDS[2]].values())
    dram = {"bandwidth_bytes_per_s": 1e9, "latency_s": 0.001}
    plain = tiers_document(lanes, options(("4blocks", "8blocks", "inf"), "exclusive", PREFILL, **dram))
    over = tiers_document(
        lanes, options(("4blocks", "8blocks", "inf"), "exclusive", PREFILL | {"overlap": True}, **dram)
    )
    assert all(
        p["prefill_s"]["mean"] > o["prefill_s"]["mean"] for p, o in zip(plain["lanes"], over["lanes"], strict=True)
    )


def test_nearest_rank_by_hand() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 8.0, 7.0, 6.0, 10.0]
    assert [nearest_rank(values, q) for q in (0.5, 0.9, 0.99)] == [5.0, 9.0, 10.0]
    assert nearest_rank([3.0], 0.5) == 3.0 and nearest_rank([], 0.9) == 0.0
    assert nearest_rank([1.0, 2.0, 3.0], 0.5) == 2.0  # rank ceil(1.5) = 2


# ---------------------------------------------------------------------------------------------
# inclusive capacities that decrease


@pytest.mark.parametrize(
    ("capacities", "smaller"),
    [(("8blocks", "4blocks", "inf"), "dram"), (("2blocks", "6blocks", "3blocks"), "ssd")],
)
def test_inclusive_decreasing_capacities_of_one_unit_are_refused_by_the_options(
    capacities: tuple[str, ...], smaller: str
) -> None:
    # the same unit needs no facts: refused where the request is validated, naming the tier
    with pytest.raises(ValidationError) as err:
        options(capacities, "inclusive")
    assert f"{smaller} (" in str(err.value) and "non-decreasing" in str(err.value)
    options(capacities, "exclusive")  # the same capacities are fine exclusive


@pytest.mark.parametrize(
    ("capacities", "smaller", "lane"),
    [
        # 16 tokens are 4 blocks of 4 tokens (>= 4) but 2 blocks of 8 tokens: only the re-blocked lane fails
        (("1blocks", "4blocks", "16tokens"), "ssd", "reblocked-ttl"),
        (("16tokens", "3blocks", "inf"), "dram", None),  # 4 blocks of 4 tokens above 3
    ],
)
def test_inclusive_decreasing_capacities_raise(
    capacities: tuple[str, ...], smaller: str, lane: str | None, engine_lanes: dict[int, dict[str, LaneFacts]]
) -> None:
    lanes = list(engine_lanes[SEEDS[0]].values())
    with pytest.raises(TierError) as err:
        tiers_document(lanes, options(capacities, "inclusive"))
    assert smaller in str(err.value)
    if lane is not None:
        assert lane in str(err.value)
    tiers_document(lanes, options(capacities, "exclusive"))  # the same capacities are fine exclusive
