"""The state-dependent routers of ``litehit routes`` (least_loaded, cache_aware) against a naive
reference (``route_stateful`` in tests/support/routes_oracle.py, nothing shared with the engine):

- the engine (``core_c.route.RouteSim``) request by request on random prefix-tree traces, over
  replica counts, capacities (0, 1, small, large, unbounded), load windows and thresholds; the same
  trace in several batches equals one batch; a decreasing timestamp fails at its index with the
  requests before it applied;
- the command: routes.json's numbers for both routers equal the oracle's, one replica equals a
  plain LRU, a TTL config's numbers equal the oracle's with that TTL, and the refused inputs name
  their flag.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import write_rows
from routes_oracle import NaiveLru, Read, reads_of, route_stateful, summary
from test_routes_exact import TRACE_BLOCK, Case, trace_flags, tree_trace

from litehit.cli import main

NS = 10**9
U64_MAX = (1 << 64) - 1
STATEFUL = ("least_loaded", "cache_aware")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def rd(keys: list[int], ts: int, input_len: int) -> Read:
    return Read({}, list(keys), list(keys), ts, input_len)


# ---------------------------------------------------------------------------------------------
# the oracle by hand


def test_oracle_least_loaded_by_hand() -> None:
    # block 4, window 10: loads are the prefill tokens of the requests in (t - 10, t]
    reads = [
        rd([1, 2], 0, 9),  # all 0 -> r0; prefill 9
        rd([1, 2], 0, 9),  # (9, 0) -> r1; cold there: prefill 9
        rd([1, 2], 5, 9),  # (9, 9) tie -> r0; hits 2: prefill 1
        rd([7], 10, 4),  # t=10: the requests at 0 left the window; (1, 0) -> r1; prefill 4
        rd([7], 10, 5),  # (1, 4) -> r0 (cold): prefill 5
        rd([7], 10, 4),  # (6, 4) -> r1: hit 1, prefill 0
    ]
    replicas, hits = route_stateful(reads, "least_loaded", 2, None, 4, 10, Fraction(0))
    assert replicas == [0, 1, 0, 1, 0, 1]
    assert hits == [0, 0, 2, 0, 0, 1]
    # window 1: only requests at the same timestamp count (at 10 the loads start from 0 again)
    replicas, hits = route_stateful(reads, "least_loaded", 2, None, 4, 1, Fraction(0))
    assert (replicas, hits) == ([0, 1, 0, 0, 1, 0], [0, 0, 2, 0, 0, 1])
    # capacity 0 stores nothing
    assert route_stateful(reads, "least_loaded", 2, 0, 4, 10, Fraction(0))[1] == [0] * 6


def test_oracle_cache_aware_by_hand() -> None:
    a = [rd([1, 2, 3], 0, 12)]  # cold: all p = 0, loads 0 -> r0
    b = [rd([1, 2, 9], 0, 12)]  # p = (2, 0, 0); load r0 = 12, mean 4: 12 > (1 + t) * 4 unless t >= 2
    replicas, hits = route_stateful(a + b, "cache_aware", 3, None, 4, 10, Fraction(3))
    assert (replicas, hits) == ([0, 0], [0, 2])
    replicas, hits = route_stateful(a + b, "cache_aware", 3, None, 4, 10, Fraction(2))  # 12 == 3 * 4: keeps r0
    assert (replicas, hits) == ([0, 0], [0, 2])
    replicas, hits = route_stateful(a + b, "cache_aware", 3, None, 4, 10, Fraction(1, 2))  # spills to r1
    assert (replicas, hits) == ([0, 1], [0, 0])
    # the longest prefix ties: the smaller load, then the lower index
    reads = [rd([5], 0, 4), rd([5], 0, 8), rd([5, 6], 0, 9)]
    # r0 gets [5] (4 tokens); [5] again: p = (1, 0), load (4, 0), mean 2: 4 > 2 * (1 + 1/2) -> r1
    replicas, hits = route_stateful(reads, "cache_aware", 2, None, 4, 10, Fraction(1, 2))
    # third: p = (1, 1), loads (4, 8): the candidate is r0 (smaller load), 4 <= 6 * 1.5
    assert (replicas, hits) == ([0, 1, 0], [0, 0, 1])
    # with a huge threshold the second stays on r0
    assert route_stateful(reads, "cache_aware", 2, None, 4, 10, Fraction(3)) == ([0, 0, 0], [0, 1, 1])


# ---------------------------------------------------------------------------------------------
# engine traces


def engine_trace(seed: int, requests: int) -> list[Read]:
    """Requests sharing prefixes of a random tree of keys (repeats, branches, new roots, some
    without keys), random int64 ids per tree node, nondecreasing timestamps in bursts (many
    equal), input_len >= keys x block (sometimes a partial block more)."""
    rng = random.Random(seed)
    ids: dict[tuple[int, ...], int] = {}
    paths: list[list[int]] = []
    out: list[Read] = []
    t = rng.choice((0, 1, NS, 10**15, -3 * NS))
    block = 4
    for _ in range(requests):
        roll = rng.random()
        if roll < 0.07:
            path: list[int] = []
        elif not paths or roll < 0.2:
            path = [rng.randrange(50)]
        else:
            base = rng.choice(paths[-6:]) if rng.random() < 0.7 else rng.choice(paths)
            path = base[: rng.randint(1, len(base))] + [rng.randrange(3) for _ in range(rng.choice((0, 1, 1, 2, 4)))]
        path = path[:12]
        if path:
            paths.append(path)
        keys = [ids.setdefault(tuple(path[: j + 1]), rng.randrange(-(1 << 63), 1 << 63)) for j in range(len(path))]
        length = block * len(keys) + (rng.randrange(block) if rng.random() < 0.5 else 0)
        if rng.random() < 0.1:
            length += rng.randrange(1, 40)  # a long uncached tail
        out.append(rd(keys, t, length))
        t += rng.choice((0, 0, 0, 1, 7, NS // 4, NS // 2, NS, 3 * NS, 10 * NS))
    return out


def arrays(reads: list[Read]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    keys = np.array([k for r in reads for k in r.keys], dtype=np.int64)
    offsets = np.zeros(len(reads) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r.keys) for r in reads])
    ts = np.array([r.ts for r in reads], dtype=np.int64)
    lens = np.array([r.input_len for r in reads], dtype=np.int64)
    return keys, offsets, ts, lens


def sim(router: str, n: int, capacity: int, window_ns: int, threshold: Fraction, block: int = 4,
        ttl_ns: int = 0) -> Any:  # fmt: skip
    from core_c.route import RouteSim

    return RouteSim(router, replicas=n, capacity_blocks=capacity, block_size=block, window_ns=window_ns,
                    threshold=threshold, ttl_ns=ttl_ns)  # fmt: skip


def engine_run(s: Any, reads: list[Read]) -> tuple[list[int], list[int]]:
    replica, hits = s.process_batch(*arrays(reads))
    assert len(replica) == len(reads) and len(hits) == len(reads)
    return [int(x) for x in replica], [int(x) for x in hits]


def oracle_run(reads: list[Read], router: str, n: int, capacity: int, window_ns: int, threshold: Fraction,
               block: int = 4, ttl_ns: int = 0) -> tuple[list[int], list[int]]:  # fmt: skip
    cap = None if capacity == U64_MAX else capacity
    return route_stateful(reads, router, n, cap, block, window_ns, threshold, ttl_ns)


def first_difference(reads: list[Read], want: tuple[list[int], list[int]], got: tuple[list[int], list[int]]) -> str:
    for i, (w, g) in enumerate(zip(zip(*want, strict=True), zip(*got, strict=True), strict=True)):
        if w != g:
            return f"request {i} (ts {reads[i].ts}, {len(reads[i].keys)} keys): want (replica, hits) {w}, got {g}"
    return "equal"


NS_ = (1, 2, 3, 5, 8)
CAPACITIES = (0, 1, 3, 7, 20, 10**6, U64_MAX)
WINDOWS = (1, 3 * NS, (1 << 63) - 1)
THRESHOLDS = (Fraction(0), Fraction(1, 10), Fraction(1, 2), Fraction(3))


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("n", NS_)
@pytest.mark.parametrize("router", STATEFUL)
def test_engine_equals_the_oracle(router: str, n: int, capacity: int) -> None:
    """Every (window, threshold) on its own trace; least_loaded ignores the threshold, so it
    gets one threshold per window."""
    thresholds = THRESHOLDS if router == "cache_aware" else THRESHOLDS[:2]
    for w, window in enumerate(WINDOWS):
        for k, threshold in enumerate(thresholds):
            seed = ((STATEFUL.index(router) * 10 + n) * 10 + CAPACITIES.index(capacity)) * 100 + w * 10 + k
            reads = engine_trace(seed, requests=150)
            want = oracle_run(reads, router, n, capacity, window, threshold)
            with sim(router, n, capacity, window, threshold) as s:
                got = engine_run(s, reads)
            assert got == want, (seed, window, threshold, first_difference(reads, want, got))


@pytest.mark.parametrize("ttl_ns", [1, 7, NS // 2, 3 * NS])
@pytest.mark.parametrize("n", (1, 3, 8))
@pytest.mark.parametrize("router", STATEFUL)
def test_engine_with_a_ttl_equals_the_oracle(router: str, n: int, ttl_ns: int) -> None:
    """A TTL: expired blocks stay in the LRU order and their slots but hit nothing (the resident
    prefix of cache_aware counts alive blocks only)."""
    for c, capacity in enumerate((3, 20, U64_MAX)):
        seed = 50_000 + (STATEFUL.index(router) * 10 + n) * 100 + c * 10 + [1, 7, NS // 2, 3 * NS].index(ttl_ns)
        reads = engine_trace(seed, requests=150)
        want = oracle_run(reads, router, n, capacity, 3 * NS, Fraction(1, 10), ttl_ns=ttl_ns)
        with sim(router, n, capacity, 3 * NS, Fraction(1, 10), ttl_ns=ttl_ns) as s:
            got = engine_run(s, reads)
        assert got == want, (seed, capacity, first_difference(reads, want, got))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("router", STATEFUL)
def test_batches_equal_one_batch(router: str, seed: int) -> None:
    rng = random.Random(1000 + seed)
    n = rng.choice(NS_)
    capacity = rng.choice(CAPACITIES)
    window = rng.choice(WINDOWS)
    threshold = rng.choice(THRESHOLDS)
    reads = engine_trace(2000 + seed, requests=70)
    want = oracle_run(reads, router, n, capacity, window, threshold)
    with sim(router, n, capacity, window, threshold) as s:
        whole = engine_run(s, reads)
    assert whole == want, (n, capacity, window, threshold, first_difference(reads, want, whole))
    cuts = sorted(rng.sample(range(1, len(reads)), rng.randint(1, 6)))
    got: tuple[list[int], list[int]] = ([], [])
    with sim(router, n, capacity, window, threshold) as s:
        for lo, hi in zip([0, *cuts], [*cuts, len(reads)], strict=True):
            replica, hits = engine_run(s, reads[lo:hi])
            got[0].extend(replica)
            got[1].extend(hits)
    assert got == whole, (n, capacity, window, threshold, cuts, first_difference(reads, whole, got))


@pytest.mark.parametrize("router", STATEFUL)
def test_empty_batches_change_nothing(router: str) -> None:
    reads = engine_trace(77, requests=40)
    threshold = Fraction(1, 10)
    want = oracle_run(reads, router, 3, 7, 3 * NS, threshold)
    got: tuple[list[int], list[int]] = ([], [])
    with sim(router, 3, 7, 3 * NS, threshold) as s:
        for part in ([], reads[:15], [], [], reads[15:], []):
            replica, hits = engine_run(s, part)
            got[0].extend(replica)
            got[1].extend(hits)
    assert got == want, first_difference(reads, want, got)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("router", STATEFUL)
def test_a_decreasing_timestamp_fails_at_its_index_with_the_earlier_requests_applied(router: str, seed: int) -> None:
    from core_c import CoreError

    rng = random.Random(3000 + seed)
    n = rng.choice((2, 3, 5))
    capacity = rng.choice((3, 7, 20, U64_MAX))
    window = rng.choice((3 * NS, 10**18))
    threshold = rng.choice(THRESHOLDS[1:])
    reads = engine_trace(4000 + seed, requests=60)
    first = rng.randrange(1, 30)  # requests [0, first) in one good batch
    bad_at = 0 if seed % 4 == 0 else rng.randrange(1, 20)  # then a batch failing here (0: against the last batch)
    applied = reads[:first] + reads[first : first + bad_at]
    last_ts = applied[-1].ts
    bad = Read({}, [1, 2], [1, 2], last_ts - rng.randint(1, 3), 8)
    failing = [*applied[first:], bad, *reads[first + bad_at : first + bad_at + 5]]
    rest = [Read(r.row, r.raw, r.keys, max(r.ts, last_ts), r.input_len) for r in reads[first + bad_at + 5 :]]
    with sim(router, n, capacity, window, threshold) as s:
        got_first = engine_run(s, applied[:first])
        with pytest.raises(CoreError) as info:
            s.process_batch(*arrays(failing))
        assert info.value.index == bad_at, (info.value.index, bad_at, str(info.value))
        partial = info.value.partial  # type: ignore[attr-defined]  # (replica, hits) of the applied ones
        got_rest = engine_run(s, rest)
    want = oracle_run(applied + rest, router, n, capacity, window, threshold)
    assert got_first == (want[0][:first], want[1][:first])
    start = len(applied)
    assert ([int(x) for x in partial[0]], [int(x) for x in partial[1]]) == (want[0][first:start], want[1][first:start])
    want_rest = (want[0][start:], want[1][start:])
    assert got_rest == want_rest, (n, capacity, window, threshold, first_difference(rest, want_rest, got_rest))


def test_threshold_edges_on_the_engine() -> None:
    """The spill compares strictly and exactly: a load equal to (1 + t) x mean keeps the candidate."""
    reads = [rd([1, 2, 3], 0, 12), rd([1, 2, 9], 0, 12)]  # second: load r0 = 12, mean 4 over 3 replicas
    for threshold, want in ((Fraction(2), [0, 0]), (Fraction(199, 100), [0, 1]), (Fraction(3), [0, 0])):
        assert oracle_run(reads, "cache_aware", 3, U64_MAX, NS, threshold)[0] == want
        with sim("cache_aware", 3, U64_MAX, NS, threshold) as s:
            assert engine_run(s, reads)[0] == want, threshold
    # 10 tokens over 3 replicas, mean 10/3: 10 == (1 + 2) x 10/3 keeps the candidate
    reads = [rd([4, 5], 0, 10), rd([4, 6], 0, 8)]
    # loads (11, 9), mean 10: 11 == (1 + 1/10) x 10 keeps r0; 1/20 spills to r1
    reads_b = [rd([1], 0, 11), rd([2], 0, 9), rd([1, 3], 0, 12)]
    # loads (12, 7, 8), mean 9: 12 == (1 + 1/3) x 9 keeps r0
    reads_c = [rd([1], 0, 12), rd([2], 0, 7), rd([3], 0, 8), rd([1, 5], 0, 8)]
    # equalities that floating point gets wrong ((1 + t) x mean rounds below the load, a spill):
    # loads (15, 3), t = 2/3: 15 == 5/3 x 9; loads (14, 10, 11), t = 1/5: 14 == 6/5 x 35/3
    reads_d = [rd([1], 0, 15), rd([2], 0, 3), rd([1, 4], 0, 8)]
    reads_e = [rd([1], 0, 14), rd([2], 0, 10), rd([3], 0, 11), rd([1, 5], 0, 8)]
    cases = [
        (reads_d, 2, Fraction(2, 3), [0, 1, 0]),
        (reads_e, 3, Fraction(1, 5), [0, 1, 2, 0]),
        (reads, 3, Fraction(2), [0, 0]),
        (reads, 3, Fraction(1999, 1000), [0, 1]),
        (reads_b, 2, Fraction(1, 10), [0, 1, 0]),
        (reads_b, 2, Fraction(1, 20), [0, 1, 1]),
        (reads_c, 3, Fraction(1, 3), [0, 1, 2, 0]),
        (reads_c, 3, Fraction(333, 1000), [0, 1, 2, 1]),
    ]
    for trace, n, threshold, want in cases:
        assert oracle_run(trace, "cache_aware", n, U64_MAX, NS, threshold)[0] == want, threshold
        with sim("cache_aware", n, U64_MAX, NS, threshold) as s:
            assert engine_run(s, trace)[0] == want, threshold


def test_window_bounds_on_the_engine() -> None:
    """A request at t - window_ns is out of the window, at t - window_ns + 1 in it."""
    for gap, want in ((10, [0, 0]), (9, [0, 1])):
        reads = [rd([1], 100, 4), rd([2], 100 + gap, 4)]
        assert oracle_run(reads, "least_loaded", 2, U64_MAX, 10, Fraction(0))[0] == want
        with sim("least_loaded", 2, U64_MAX, 10, Fraction(0)) as s:
            assert engine_run(s, reads)[0] == want, gap


# ---------------------------------------------------------------------------------------------
# the command


WINDOW_S = 2
CLI_CAPACITIES = ("12blocks", "40blocks")
CLI_CASES = [
    Case("n4-plain", seed=11, replicas=4, requests=150),
    Case("n4-hash", seed=12, replicas=4, prefix_hash=True, requests=150),
    Case("n4-reblock", seed=13, replicas=4, lane_block=8, requests=150),
    Case("n3-ttl", seed=16, replicas=3, ttl=2, prefix_hash=True, requests=150),
]


def routes_run(
    case: Case,
    folder: Path,
    replicas: int,
    *,
    threshold: str = "0.25",
    window_s: str = str(WINDOW_S),
    capacities: tuple[str, ...] = CLI_CAPACITIES,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = tree_trace(case)
    trace = write_rows(folder / "trace.jsonl", rows)
    out = folder / "routes.json"
    argv = ["routes", str(trace), *trace_flags(case), "--replicas", str(replicas), "--routers",
            "least_loaded,cache_aware,round_robin", "--capacity", *capacities, "--load-window-s", window_s,
            "--balance-threshold", threshold, "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    return rows, json.loads(out.read_text())


def entry_of(doc: dict[str, Any], router: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [e for e in doc["routers"] if e["router"] == router]
    (entry,) = entries
    return entry


def check_document(
    case: Case, rows: list[dict[str, Any]], doc: dict[str, Any], threshold: Fraction, window_ns: int,
    capacities: tuple[str, ...],
) -> None:  # fmt: skip
    n, block = case.replicas, case.lane_block
    reads = reads_of(rows, TRACE_BLOCK, block, case.prefix_hash)
    assert [e["router"] for e in doc["routers"]] == ["least_loaded", "cache_aware", "round_robin"]
    rr = {c["capacity"]: c for c in entry_of(doc, "round_robin")["capacities"]}
    for router in STATEFUL:
        entry = entry_of(doc, router)
        assert entry["facts"] is None and entry["curve"] is None, router
        assert [c["capacity"] for c in entry["capacities"]] == list(capacities)
        for got in entry["capacities"]:
            cap = None if got["capacity"] == "inf" else int(got["capacity"].removesuffix("blocks"))
            replicas, hits = route_stateful(reads, router, n, cap, block, window_ns, threshold, case.ttl * NS)
            want = summary(reads, replicas, n, hits, block, window_ns)
            label = (router, got["capacity"])
            assert (got["hit_tokens"], got["input_tokens"]) == (want["hit_tokens"], want["input_tokens"]), label
            assert got["replicas"] == want["replicas"], label
            assert got["hit_rate"] == pytest.approx(want["hit_rate"], rel=1e-12, abs=1e-15), label
            for ratio in ("max_over_mean", "p99_over_mean"):
                assert got["imbalance"][ratio] == pytest.approx(want["imbalance"][ratio], rel=1e-12), (label, ratio)
            rr_rate = rr[got["capacity"]]["hit_rate"]
            assert got["vs_round_robin"] == pytest.approx(got["hit_rate"] - rr_rate, abs=1e-12), label


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.name for c in CLI_CASES])
def test_routes_document_equals_the_oracle(case: Case, tmp_path: Path) -> None:
    rows, doc = routes_run(case, tmp_path, case.replicas)
    check_document(case, rows, doc, Fraction(1, 4), WINDOW_S * NS, CLI_CAPACITIES)


@pytest.mark.parametrize(
    ("threshold", "window_s"),
    [("0", "2"), ("0.1", "0.5"), ("3", "30"), ("0.1", "1e-9")],
    ids=["t0-w2", "t0.1-w0.5", "t3-w30", "t0.1-w1ns"],
)
def test_routes_threshold_and_window_are_read_exactly(threshold: str, window_s: str, tmp_path: Path) -> None:
    """--balance-threshold 0.1 is the fraction 1/10; --load-window-s 0.5 is 500 000 000 ns."""
    case = Case("n3", seed=15, replicas=3, requests=150)
    capacities = ("5blocks", "inf")
    rows, doc = routes_run(case, tmp_path, 3, threshold=threshold, window_s=window_s, capacities=capacities)
    window_ns = round(Fraction(window_s) * NS)
    check_document(case, rows, doc, Fraction(threshold), window_ns, capacities)


def test_one_replica_is_a_plain_lru(tmp_path: Path) -> None:
    case = Case("n1", seed=14, replicas=1, requests=150)
    rows, doc = routes_run(case, tmp_path, 1)
    reads = reads_of(rows, TRACE_BLOCK, case.lane_block, case.prefix_hash)
    for cap_text in CLI_CAPACITIES:
        lru = NaiveLru(int(cap_text.removesuffix("blocks")))
        want = sum(lru.request(r.keys, r.ts) for r in reads) * case.lane_block
        for router in (*STATEFUL, "round_robin"):
            (got,) = [c for c in entry_of(doc, router)["capacities"] if c["capacity"] == cap_text]
            assert got["hit_tokens"] == want, (router, cap_text)
            assert got["imbalance"]["max_over_mean"] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [{"type": "request", "instance_id": "x", "trace_id": f"t{i}", "timestamp_ns": NS + i, "keys": [1, 2][: i % 3],
             "input_len": 4 * (i % 3) + 1} for i in range(6)]  # fmt: skip
    return write_rows(tmp_path_factory.mktemp("bad") / "t.jsonl", rows)


@pytest.mark.parametrize(
    ("extra", "flags"),
    [
        (["--routers", "cache_aware"], ("--capacity",)),
        (["--routers", "least_loaded,round_robin"], ("--capacity",)),
        (["--routers", "cache_aware", "--capacity", "10blocks", "--balance-threshold", "-1"], ("--balance-threshold",)),
        (["--routers", "least_loaded", "--capacity", "3parsecs"], ("--capacity",)),
        (["--routers", "cache_aware", "--capacity", "10blocks", "--load-window-s", "-2"], ("--load-window-s",)),
    ],
    ids=["cache_aware-no-capacity", "least_loaded-no-capacity", "negative-threshold", "bad-capacity", "bad-window"],
)
def test_bad_input(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], flags: tuple[str, ...]
) -> None:
    out = tmp_path / "routes.json"
    code, stdout, err = run(["routes", str(small_trace), "--format", "standard", "--block-size", "4", "--replicas",
                             "2", *extra, "-o", str(out)], capsys)  # fmt: skip
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("litehit: error: "), err
    assert any(f in err for f in flags), err
    assert "Traceback" not in err + stdout
    assert list(tmp_path.iterdir()) == []
