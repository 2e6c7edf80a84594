"""Hybrid lanes (Full blocks + linear-attention states, HYBRID_G5.md) through the CLI: ``litehit
replay`` writes ``bytes:`` rows for an instance with ``linear_step > 0`` and the unchanged untagged
RLE rows for a Full-only one; ``litehit query`` and ``litehit curve`` answer byte-step rows on the
byte axis; the commands that only read Full-only facts or configs refuse hybrid ones in one line.

The golden scenarios are HYBRID_G5 section 5.5 #19 and #20; the differential tests compare every
row's points, the query at many byte capacities and the curve's breakpoints with the naive model of
tests/support/hybrid_oracle.py (nothing shared with the engine), fed the lane's keys in input order.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import FACTS_HEADER, config, group, hybrid_instance, instance, write_rows
from hybrid_oracle import NaiveHybrid, Point, project_bytes, project_infinite, strictly_increasing

from litehit.cli import main

NS = 10**9
MASK = (1 << 64) - 1
INF = 1 << 70  # beyond every threshold: the naive answer of an infinite capacity


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def req(
    trace_id: str, ts: int, keys: list[int], length: int, inst: str = "m1", kind: str = "request"
) -> dict[str, Any]:
    return {"type": kind, "instance_id": inst, "trace_id": trace_id, "timestamp_ns": ts, "keys": keys,
            "input_len": length}  # fmt: skip


def replay(folder: Path, rows: list[dict[str, Any]], cfg_extra: dict[str, Any], capsys: pytest.CaptureFixture[str],
           *, block_size: int = 4) -> Path:  # fmt: skip
    """Write the trace and the config, replay it, return the facts file."""
    folder.mkdir(parents=True, exist_ok=True)
    trace = write_rows(folder / "trace.jsonl", rows)
    cfg = config(trace, folder / "out", block_size=block_size, trace_format="standard", **cfg_extra)
    (folder / "config.json").write_text(json.dumps(cfg))
    code, _out, err = run(["replay", str(folder / "config.json")], capsys)
    assert code == 0, err
    facts = folder / "out" / "litehit_facts.csv"
    assert facts.is_file()
    return facts


def parse_points(field: str) -> list[Point]:
    assert field.startswith("bytes:"), field
    return [(int(a), int(b)) for a, b in json.loads(field[len("bytes:") :])]


def read_rows(facts: Path) -> list[dict[str, str]]:
    with facts.open(newline="") as f:
        return list(csv.DictReader(f))


def one_error_line(code: int, err: str, *needles: str) -> str:
    """A refusal: exit 1, one stderr line starting with ``litehit: error:`` that names each needle."""
    assert code == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("litehit: error:"), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---------------------------------------------------------------------------------------------
# golden scenarios (HYBRID_G5 section 5.5)


def golden19(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    rows = [req("r1", 1000, [1, 2, 3, 4], 17), req("r2", 2000, [1, 2, 3, 4], 17)]
    return replay(tmp_path / "g19", rows, {"instances": [hybrid_instance("m1")]}, capsys)


def test_golden_19_publishes_byte_step_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = golden19(tmp_path, capsys)
    assert facts.read_text() == (
        FACTS_HEADER + '\nr1,m1,1000,17,4,16384,"bytes:[]"\nr2,m1,2000,17,4,16384,"bytes:[[53248,3],[73728,4]]"\n'
    )


def test_golden_19_query_at_byte_capacities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = golden19(tmp_path, capsys)
    out = tmp_path / "q.jsonl"
    code, stdout, err = run(["query", str(facts), "--capacity-gb", repr(53248 / 2**30), "-1", "-o", str(out)], capsys)
    assert code == 0, err
    text = out.read_text()
    assert text == (
        '{"trace_id":"r1","instance_id":"m1","timestamp_ns":1000,"input_token_len":17,"hit_blocks":[0,0],'
        '"hit_rates":[0,0]}\n'
        '{"trace_id":"r2","instance_id":"m1","timestamp_ns":2000,"input_token_len":17,"hit_blocks":[3,4],'
        '"hit_rates":[0.705882,0.941176]}\n'
        '{"summary":true,"instance_id":"m1","requests":2,"total_input_tokens":34,"capacity_gb":[4.95911e-05,-1],'
        '"total_hit_blocks":[3,4],"total_hit_tokens":[12,16],"hit_rates":[0.352941,0.470588]}\n'
        '{"summary":true,"requests":2,"total_input_tokens":34,"capacity_gb":[4.95911e-05,-1],'
        '"total_hit_blocks":[3,4],"total_hit_tokens":[12,16],"hit_rates":[0.352941,0.470588]}\n'
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 4
    total = lines[-1]
    assert total["total_hit_blocks"] == [3, 4]
    assert total["total_input_tokens"] == 34
    assert total["hit_rates"] == [0.352941, 0.470588]
    assert total["capacity_gb"] == [4.95911e-05, -1]
    assert "35.29%" in stdout and "47.06%" in stdout

    # the same capacity in other units, and just below the thresholds
    code, _, err = run(["query", str(facts), "--capacity-gb", "53248B", "52KiB", "53247B", "73727B", "72KiB",
                        "-1", "0", "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    total = [json.loads(line) for line in out.read_text().splitlines()][-1]
    assert total["total_hit_blocks"] == [3, 3, 0, 3, 4, 4, 0]
    assert total["total_hit_tokens"] == [12, 12, 0, 12, 16, 16, 0]

    # inf is the infinite capacity too (the printed summary)
    code, stdout, err = run(["query", str(facts), "--capacity-gb", "53247B", "inf", "Infinity"], capsys)
    assert code == 0, err
    (total_line,) = [line for line in stdout.splitlines() if line.startswith("total")]
    assert total_line.split()[1:] == ["2", "0.00%", "47.06%", "47.06%"]


@pytest.mark.parametrize("capacity", ["inf", "Infinity"])
def test_query_jsonl_with_inf_capacity_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                capacity: str) -> None:  # fmt: skip
    facts = golden19(tmp_path, capsys)
    out = tmp_path / "q.jsonl"
    code, _, err = run(["query", str(facts), "--capacity-gb", "1", capacity, "-o", str(out)], capsys)
    assert code == 0, err
    total = [json.loads(line) for line in out.read_text().splitlines()][-1]
    assert total["total_hit_blocks"] == [4, 4]
    assert total["capacity_gb"] == [1, -1]


def test_golden_19_curve_on_the_byte_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = golden19(tmp_path, capsys)
    code, stdout, err = run(["curve", str(facts), "--format", "json"], capsys)
    assert code == 0, err
    (lane,) = json.loads(stdout)["instances"]
    assert lane["instance_id"] == "m1"
    assert lane["requests"] == 2 and lane["total_input_tokens"] == 34
    rows = lane["breakpoints"]["rows"]
    cols = lane["breakpoints"]["columns"]
    got = [(r[cols.index("capacity_bytes")], r[cols.index("hit_tokens")]) for r in rows]
    assert got == [(0, 0), (53248, 12), (73728, 16)]
    assert all(r[cols.index("capacity_blocks")] is None for r in rows)
    assert lane["infinite"]["capacity_bytes"] == 73728 and lane["infinite"]["hit_tokens"] == 16


def test_golden_20_linear_lane_honors_group_ttl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [req("r1", 1, [1], 4), req("r2", 1_000_000_001, [1], 4), req("r3", 1_000_000_002, [1], 4)]
    facts = replay(tmp_path, rows, {"instances": [hybrid_instance("m1")], "groups": [group(ttl_seconds=1)]}, capsys)
    assert facts.read_text() == (
        FACTS_HEADER + "\n"
        'r1,m1,1,4,4,16384,"bytes:[]"\n'
        'r2,m1,1000000001,4,4,16384,"bytes:[]"\n'
        'r3,m1,1000000002,4,4,16384,"bytes:[[20480,1]]"\n'
    )


# ---------------------------------------------------------------------------------------------
# differential: random prefix-tree traces against the naive model


def to_int64(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def tree_trace(seed: int, n: int, block: int, instances: tuple[str, ...] = ("m1",)) -> list[dict[str, Any]]:
    """A prefix tree of requests (branches, repeats, new roots, long chains), some without keys
    (input_len below one block), a few ``get`` reads, and bursts of equal timestamps. Without
    prefix hashing the keys are the chain already: one random 64-bit id per tree prefix, written
    as uint64 or (sometimes) as the equal int64."""
    rng = random.Random(seed)
    ids: dict[tuple[int, ...], int] = {}
    paths: list[list[int]] = []
    rows: list[dict[str, Any]] = []
    t = NS
    for i in range(n):
        roll = rng.random()
        if roll < 0.08:
            path: list[int] = []
        elif not paths or roll < 0.2:
            path = [rng.randrange(10**6)]
        else:
            base = rng.choice(paths[-10:]) if rng.random() < 0.7 else rng.choice(paths)
            path = base[: rng.randint(1, len(base))] + [rng.randrange(3) for _ in range(rng.choice((0, 1, 2, 3, 5)))]
        path = path[:16]
        if path:
            paths.append(path)
        keys = [ids.setdefault(tuple(path[: j + 1]), rng.getrandbits(64)) for j in range(len(path))]
        written = [to_int64(k) if k >> 63 and rng.random() < 0.3 else k for k in keys]
        length = block * len(keys) + rng.randrange(block)
        if length == 0:
            length = rng.randint(1, block - 1)
        kind = "get" if rng.random() < 0.1 else "request"
        rows.append(req(f"q{i}", t, written, length, inst=rng.choice(instances), kind=kind))
        if rng.random() > 0.4:  # bursts: 40% of the requests share the previous timestamp
            t += rng.choice((1, 2, 5, 10, 20, 40)) * NS // 10
    return rows


@dataclass(frozen=True)
class Lane:
    """One hybrid instance: full/linear spec sizes (bytes) and linear_step (tokens)."""

    name: str
    full: tuple[int, ...]
    linear: tuple[int, ...]
    linear_step: int

    def spec(self, instance_id: str, block: int, group_name: str) -> dict[str, Any]:
        full = [{"name": f"f{i}", "size": s} for i, s in enumerate(self.full)]
        linear = [{"name": f"l{i}", "size": s} for i, s in enumerate(self.linear)]
        return {
            "instance_group_name": group_name,
            "instance_id": instance_id,
            "block_size": block,
            "linear_step": self.linear_step,
            "location_spec_infos": full + linear,
            "location_spec_groups": [
                {"name": "FULL", "spec_names": [s["name"] for s in full]},
                {"name": "LIN", "spec_names": [s["name"] for s in linear]},
            ],
            "optimizer_state_info": {"full_location_spec_group_name": "FULL", "linear_location_spec_group_name": "LIN"},
        }

    def model(self, block: int, ttl_seconds: int) -> NaiveHybrid:
        return NaiveHybrid(sum(self.full), sum(self.linear), self.linear_step // block, ttl_seconds * NS)


TTL = 2  # seconds; the trace advances 0.1 .. 4 s per step, so states and blocks do expire

# (trace seed, requests, trace block = lane block, lanes): every lane runs with and without the TTL
CASES = {
    "bs4": (11, 400, 4, [
        Lane("mk", (8192, 8192), (2048, 2048), 12),  # MakeHybridInfo: F 16384, L 4096, s 3
        Lane("s1", (1000,), (7,), 4),  # a state at every block
        Lane("bigL", (3000, 5000, 1), (40000,), 8),  # the state outweighs the blocks, s 2
    ]),
    "bs16": (12, 300, 16, [
        Lane("s5", (65536,), (4096, 4096), 80),
        Lane("unit", (1,), (1,), 16),  # charge 1: thresholds are object counts
    ]),
    "bs2": (13, 250, 2, [
        Lane("tails", (100,), (250,), 200),  # s 100 > every request: only the tails are written
        Lane("s3", (7, 9), (5,), 6),
    ]),
}  # fmt: skip


@dataclass
class Expected:
    """One facts row as the naive model sees it: the points and the hits at each query capacity."""

    trace_id: str
    ts: int
    length: int
    points: list[Point]
    hits: list[int]


@dataclass
class Replayed:
    facts: Path
    block: int
    lanes: dict[str, tuple[int, list[Expected]]]  # lane id -> (block bytes, expected rows in input order)
    capacities: list[str]  # as passed to litehit query
    capacity_bytes: list[int | None]  # None = infinite


def capacities_for(rng: random.Random, thresholds: set[int]) -> tuple[list[str], list[int | None]]:
    """Exact thresholds and thresholds - 1 (bytes and exact GiB numbers), 0, 1, unit forms, infinite."""
    chosen = sorted(rng.sample(sorted(thresholds), min(40, len(thresholds))))
    args: list[str] = ["0", "1B", "512MiB", "1KiB", "0.5KiB", "-1", "-2.5"]
    values: list[int | None] = [0, 1, 512 << 20, 1024, 512, None, None]
    for t in chosen:
        args.append(f"{t}B" if rng.random() < 0.6 else repr(t / 2**30))  # t / 2**30 is exact in a double
        values.append(t)
        args.append(f"{t - 1}B")
        values.append(t - 1)
    return args, values


_replays: dict[str, Replayed] = {}


def replayed(name: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> Replayed:
    """Replay the case once (all its lanes, with and without TTL, fanned out) and run the model."""
    if name in _replays:
        return _replays[name]
    seed, n, block, lanes = CASES[name]
    rows = tree_trace(seed, n, block)
    instances = []
    for lane in lanes:
        instances.append(lane.spec(f"{lane.name}-ttl0", block, "plain"))
        instances.append(lane.spec(f"{lane.name}-ttl{TTL}", block, "ttl"))
    groups = [group("plain", enable_prefix_hash=False), group("ttl", ttl_seconds=TTL, enable_prefix_hash=False)]
    facts = replay(tmp_path_factory.mktemp(name), rows,
                   {"instances": instances, "groups": groups, "fanout_all_instances": True}, capsys, block_size=block)  # fmt: skip

    # first pass: the points (the capacities come from the thresholds)
    expected: dict[str, tuple[int, list[Expected]]] = {}
    lane_keys = [[k & MASK for k in r["keys"]] for r in rows]
    for lane in lanes:
        for ttl in (0, TTL):
            lane_id = f"{lane.name}-ttl{ttl}"
            model = lane.model(block, ttl)
            exp = []
            for r, keys in zip(rows, lane_keys, strict=True):
                points = model.process(keys, r["timestamp_ns"])
                assert strictly_increasing(points)
                exp.append(Expected(r["trace_id"], r["timestamp_ns"], r["input_len"], points, []))
            expected[lane_id] = (sum(lane.full), exp)
    thresholds = {p[0] for _bb, exp in expected.values() for e in exp for p in e.points}
    args, values = capacities_for(random.Random(seed), thresholds)

    # second pass: the direct per-capacity answer (hits_at on the state before each request)
    for lane in lanes:
        for ttl in (0, TTL):
            lane_id = f"{lane.name}-ttl{ttl}"
            model = lane.model(block, ttl)
            for r, keys, e in zip(rows, lane_keys, expected[lane_id][1], strict=True):
                now = r["timestamp_ns"]
                e.hits = [model.hits_at(keys, INF if c is None else c, now=now) for c in values]
                assert e.hits == [project_bytes(e.points, INF if c is None else c) for c in values]
                assert e.points == model.process(keys, now)
    _replays[name] = Replayed(facts, block, expected, args, values)
    return _replays[name]


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         capsys: pytest.CaptureFixture[str]) -> Replayed:  # fmt: skip
    return replayed(request.param, tmp_path_factory, capsys)


def test_rows_equal_the_naive_model(case: Replayed) -> None:
    rows = read_rows(case.facts)
    by_lane: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_lane.setdefault(row["instance_id"], []).append(row)
    assert sorted(by_lane) == sorted(case.lanes)
    nonempty = skipping = 0
    for lane_id, (block_bytes, exp) in case.lanes.items():
        got = by_lane[lane_id]
        assert len(got) == len(exp)
        for row, e in zip(got, exp, strict=True):
            assert row["trace_id"] == e.trace_id
            assert int(row["timestamp_ns"]) == e.ts
            assert int(row["input_token_len"]) == e.length
            assert int(row["block_size_tokens"]) == case.block
            assert int(row["block_bytes"]) == block_bytes  # the Full charge, for hybrid rows too
            assert parse_points(row["hit_curve"]) == e.points, (lane_id, e.trace_id)
            nonempty += bool(e.points)
            skipping += any(h != i + 1 for i, (_c, h) in enumerate(e.points))
    assert nonempty > len(rows) // 4  # the trace does hit
    assert skipping > 0  # and restore points skip positions without a state (not Full-only curves)
    # every row is written as "bytes:[...]" in quotes, "bytes:[]" when empty
    for line in case.facts.read_text().splitlines()[1:]:
        assert line.endswith('"') and ',"bytes:[' in line


def test_ttl_changes_the_answers(case: Replayed) -> None:
    """Guard for the trace: the TTL lanes really expire blocks or states."""
    for lane_id, (_bb, exp) in case.lanes.items():
        if lane_id.endswith("-ttl0"):
            other = case.lanes[lane_id[: -len("ttl0")] + f"ttl{TTL}"][1]
            assert any(a.points != b.points for a, b in zip(exp, other, strict=True)), lane_id


def test_query_equals_the_naive_hits(case: Replayed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q.jsonl"
    code, _, err = run(["query", str(case.facts), "--capacity-gb", *case.capacities, "-o", str(out)], capsys)
    assert code == 0, err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    per_row = [line for line in lines if not line.get("summary")]
    summaries = {line.get("instance_id"): line for line in lines if line.get("summary")}
    by_lane: dict[str, list[dict[str, Any]]] = {}
    for line in per_row:
        by_lane.setdefault(line["instance_id"], []).append(line)
    slots = len(case.capacity_bytes)
    grand_blocks = [0] * slots
    grand_tokens = 0
    for lane_id, (_bb, exp) in case.lanes.items():
        got = by_lane[lane_id]
        assert [g["trace_id"] for g in got] == [e.trace_id for e in exp]
        for g, e in zip(got, exp, strict=True):
            assert g["hit_blocks"] == e.hits, (lane_id, e.trace_id, case.capacities)
        totals = [sum(e.hits[i] for e in exp) for i in range(slots)]
        tokens = sum(e.length for e in exp)
        s = summaries[lane_id]
        assert s["requests"] == len(exp)
        assert s["total_input_tokens"] == tokens
        assert s["total_hit_blocks"] == totals
        assert s["total_hit_tokens"] == [t * case.block for t in totals]
        assert s["hit_rates"] == pytest.approx([t * case.block / tokens for t in totals], rel=1e-5, abs=1e-6)
        grand_blocks = [a + b for a, b in zip(grand_blocks, totals, strict=True)]
        grand_tokens += tokens
    total = summaries[None]
    assert total["total_hit_blocks"] == grand_blocks
    assert total["total_input_tokens"] == grand_tokens
    assert len(total["capacity_gb"]) == slots
    assert [c < 0 for c in total["capacity_gb"]] == [c is None for c in case.capacity_bytes]  # as given: -1, -2.5


def test_curve_breakpoints_equal_the_naive_projections(case: Replayed, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = run(["curve", str(case.facts), "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    lanes = {lane["instance_id"]: lane for lane in doc["instances"]}
    assert sorted(lanes) == sorted(case.lanes)
    for lane_id, (_bb, exp) in case.lanes.items():
        lane = lanes[lane_id]
        tokens = sum(e.length for e in exp)
        assert lane["requests"] == len(exp) and lane["total_input_tokens"] == tokens
        cols = lane["breakpoints"]["columns"]
        got = [(r[cols.index("capacity_bytes")], r[cols.index("hit_tokens")]) for r in lane["breakpoints"]["rows"]]
        thresholds = sorted({p[0] for e in exp for p in e.points})
        # the total strictly grows at every threshold of every row, and nowhere else
        assert [c for c, _ in got] == [0, *thresholds], lane_id
        for capacity, hit_tokens in got:
            assert hit_tokens == case.block * sum(project_bytes(e.points, capacity) for e in exp), (lane_id, capacity)
        for r in lane["breakpoints"]["rows"]:
            assert r[cols.index("hit_rate")] == pytest.approx(r[cols.index("hit_tokens")] / tokens)
        plateau = case.block * sum(project_infinite(e.points) for e in exp)
        assert lane["infinite"]["hit_tokens"] == plateau
        if thresholds:
            assert lane["infinite"]["capacity_bytes"] == thresholds[-1]


def test_routed_hybrid_lanes_see_their_own_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without fanout each trace instance is its own lane: each lane replays its sub-trace."""
    block = 4
    rows = tree_trace(21, 300, block, instances=("m1", "m2"))
    lanes = {"m1": Lane("m1", (8192, 8192), (2048, 2048), 12), "m2": Lane("m2", (512,), (3000,), 8)}
    instances = [lanes["m1"].spec("m1", block, "g1"), lanes["m2"].spec("m2", block, "g1")]
    facts = replay(tmp_path, rows, {"instances": instances, "groups": [group(ttl_seconds=TTL, enable_prefix_hash=False)]},
                   capsys, block_size=block)  # fmt: skip
    got: dict[str, list[dict[str, str]]] = {"m1": [], "m2": []}
    for row in read_rows(facts):
        got[row["instance_id"]].append(row)
    for lane_id, lane in lanes.items():
        model = lane.model(block, TTL)
        sub = [r for r in rows if r["instance_id"] == lane_id]
        assert len(got[lane_id]) == len(sub)
        for r, row in zip(sub, got[lane_id], strict=True):
            assert row["trace_id"] == r["trace_id"]
            assert parse_points(row["hit_curve"]) == model.process([k & MASK for k in r["keys"]], r["timestamp_ns"])


# ---------------------------------------------------------------------------------------------
# a Full-only lane beside a hybrid one


def test_full_only_lane_is_unchanged_beside_a_hybrid_lane(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tree_trace(31, 250, 4)
    full = instance("i1")
    hybrid = hybrid_instance("m1")
    mixed = replay(tmp_path / "mixed", rows, {"instances": [full, hybrid], "fanout_all_instances": True}, capsys)
    solo_full = replay(tmp_path / "full", rows, {"instances": [full], "fanout_all_instances": True}, capsys)
    solo_hybrid = replay(tmp_path / "hybrid", rows, {"instances": [hybrid], "fanout_all_instances": True}, capsys)

    def lines_of(facts: Path, lane: str) -> list[str]:
        text = facts.read_text()
        assert text.startswith(FACTS_HEADER + "\n")
        return [line for line in text.splitlines(keepends=True)[1:] if next(csv.reader(io.StringIO(line)))[1] == lane]

    full_lines = lines_of(mixed, "i1")
    assert len(full_lines) == len(rows)
    assert full_lines == solo_full.read_text().splitlines(keepends=True)[1:]  # byte-identical
    fields = [next(csv.reader(io.StringIO(line))) for line in full_lines]
    assert all(f[6].startswith("[") for f in fields)  # untagged RLE, "[]" when empty
    assert any(f[6] != "[]" for f in fields)
    assert all(line.rstrip("\n").endswith(']"') and ',"[' in line for line in full_lines)

    hybrid_lines = lines_of(mixed, "m1")
    assert hybrid_lines == solo_hybrid.read_text().splitlines(keepends=True)[1:]
    model = NaiveHybrid(16384, 4096, 3)
    for r, line in zip(rows, hybrid_lines, strict=True):
        f = next(csv.reader(io.StringIO(line)))
        assert f[0] == r["trace_id"] and f[5] == "16384"
        assert parse_points(f[6]) == model.process([k & MASK for k in r["keys"]], r["timestamp_ns"])

    # query reads both kinds in one file: at an infinite capacity the Full-only lane covers at
    # least what the hybrid lane recovers (a restore point needs its Full prefix)
    out = tmp_path / "q.jsonl"
    code, _, err = run(["query", str(mixed), "--capacity-gb", "1", "-1", "-o", str(out)], capsys)
    assert code == 0, err
    summaries = {s.get("instance_id"): s for s in map(json.loads, out.read_text().splitlines()) if s.get("summary")}
    assert summaries["i1"]["total_hit_blocks"][1] >= summaries["m1"]["total_hit_blocks"][1] > 0
    # ... but a unit capacity has no meaning on the mixed file's hybrid lane
    code, _, err = run(["query", str(mixed), "--capacity-gb", "10blocks"], capsys)
    one_error_line(code, err, "m1")


# ---------------------------------------------------------------------------------------------
# refusals


@pytest.mark.parametrize("capacity", ["10blocks", "100tokens", "1Mtokens"])
def test_query_refuses_unit_capacities_on_hybrid_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      capacity: str) -> None:  # fmt: skip
    facts = golden19(tmp_path, capsys)
    code, out, err = run(["query", str(facts), "--capacity-gb", "1", capacity], capsys)
    line = one_error_line(code, err, "m1")
    assert "hybrid" in line
    assert out == ""


def test_tiers_of_golden_19_in_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """r2 restores 3 blocks within 53248 B and 4 within 73728 B: an HBM of 53248 B serves 3, a DRAM
    of 20480 B more (exclusive: one LRU of 73728 B) serves the 4th; inclusive, a DRAM of 73728 B."""
    facts = golden19(tmp_path, capsys)
    out_json = tmp_path / "tiers.json"
    code, out, _ = run(
        ["tiers", str(facts), "--tier", "hbm=53248B", "--tier", "dram=20480B", "-o", str(out_json)], capsys
    )
    assert code == 0
    doc = json.loads(out_json.read_text())
    (lane,) = doc["lanes"]
    assert lane["hybrid"] is True and lane["block_bytes"] == 16384
    tiers = lane["tiers"]
    assert [t["hit_blocks"] for t in tiers] == [3, 1]
    assert [t["capacity_blocks"] for t in tiers] == [None, None]
    assert [t["bytes_loaded"] for t in tiers] == [0, 16384]
    assert tiers[1]["cumulative_hit_rate"] == 4 * 4 / 34
    assert any("hybrid lanes" in n for n in doc["notes"])
    assert "hybrid:" in out and "52 KiB" in out and "20 KiB" in out
    code, _, _ = run(
        ["tiers", str(facts), "--tier", "hbm=53247B", "--tier", "dram=73728B", "--mode", "inclusive",
         "-o", str(out_json)], capsys)  # fmt: skip
    assert code == 0
    assert [t["hit_blocks"] for t in json.loads(out_json.read_text())["lanes"][0]["tiers"]] == [0, 4]


@pytest.mark.parametrize("capacity", ["100blocks", "1Mtokens"])
def test_tiers_refuse_block_capacities_on_hybrid_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       capacity: str) -> None:  # fmt: skip
    facts = golden19(tmp_path, capsys)
    code, _, err = run(["tiers", str(facts), "--tier", f"hbm={capacity}", "--tier", "dram=inf"], capsys)
    line = one_error_line(code, err, "m1")
    assert "hybrid" in line and "bytes" in line


def test_plan_of_golden_19_in_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """30% of 34 tokens = 11 tokens = 3 blocks: r2 restores 3 blocks from 53248 B on. With a fixed
    16 KiB HBM the cheapest exclusive DRAM adds the 36864 B left; a block-unit range is refused."""
    facts = golden19(tmp_path, capsys)
    out = tmp_path / "plan.json"
    argv = ["plan", str(facts), "--tier", "hbm=16KiB", "--tier", "dram=0..1GiB", "--price", "hbm=4", "--price",
            "dram=1", "--target-hit-rate", "0.3", "-o", str(out)]  # fmt: skip
    code, text, err = run(argv, capsys)
    assert code == 0, err
    assert "best: hbm 16 KiB, dram 36 KiB" in text
    doc = json.loads(out.read_text())
    best = doc["best"]
    assert [t["capacity_bytes"] for t in best["tiers"]] == [16384, 36864]
    assert [t["capacity_blocks"] for t in best["tiers"]] == [None, None] and best["total_capacity_blocks"] is None
    assert best["hit_rate"] == 3 * 4 / 34
    assert "53,248 bytes" in doc["searched"]
    code, _, err = run(["plan", str(facts), "--tier", "hbm=0..100blocks", "--target-hit-rate", "0.3"], capsys)
    line = one_error_line(code, err, "m1")
    assert "hybrid" in line and "bytes" in line


def test_plan_reaches_the_naive_smallest_capacity(case: Replayed, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """One ranged tier and a hit-rate target: each hybrid lane's best capacity is the smallest byte
    threshold whose naive hits reach the target (or the target is unreachable)."""
    out = tmp_path / "plan.json"
    code, _, err = run(["plan", str(case.facts), "--tier", "hbm=0..inf", "--price", "hbm=1", "--target-hit-rate", "0.15",
                        "-o", str(out)],
                       capsys)  # fmt: skip
    assert code == 0, err
    plans = {p["lane"]: p for p in json.loads(out.read_text())["lanes"]}
    for lane_id, (_bb, exp) in case.lanes.items():
        input_tokens = sum(e.length for e in exp)
        need_tokens = -(-input_tokens * 15 // 100)
        need_blocks = -(-need_tokens // case.block)
        thresholds = sorted({c for e in exp for c, _ in e.points})
        reaching = [c for c in thresholds if sum(project_bytes(e.points, c) for e in exp) >= need_blocks]
        plan = plans[lane_id]
        if not reaching:
            assert plan["best"] is None and "unreachable" in plan, lane_id
            continue
        assert plan["best"]["tiers"][0]["capacity_bytes"] == reaching[0], lane_id


@pytest.mark.parametrize("mode", ["exclusive", "inclusive"])
def test_tiers_equal_the_naive_model(case: Replayed, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     mode: str) -> None:  # fmt: skip
    """Every hybrid lane's tier split at byte capacities drawn from its thresholds equals the sums
    of the naive model's points projected at tiers 1..i (exclusive: the capacities' running sums)."""
    rng = random.Random(len(case.lanes) + len(mode))
    thresholds = sorted({p[0] for _bb, exp in case.lanes.values() for e in exp for p in e.points})
    for trial in range(3):
        sizes = sorted(rng.sample(thresholds, 2))
        if mode == "exclusive":
            sizes = [sizes[0], sizes[1] - sizes[0] if trial else sizes[1]]
        args = [f"t{i}={size}B" for i, size in enumerate(sizes)] + ["t9=inf"]
        out_json = tmp_path / f"tiers-{mode}-{trial}.json"
        argv = [
            "tiers",
            str(case.facts),
            *(f for a in args for f in ("--tier", a)),
            "--mode",
            mode,
            "-o",
            str(out_json),
        ]
        code, _, err = run(argv, capsys)
        assert code == 0, err
        lanes = {lane["lane"]: lane for lane in json.loads(out_json.read_text())["lanes"]}
        for lane_id, (block_bytes, exp) in case.lanes.items():
            depths = [sizes[0], sizes[0] + sizes[1]] if mode == "exclusive" else sizes
            cumulative = [sum(project_bytes(e.points, d) for e in exp) for d in depths]
            cumulative.append(sum(project_infinite(e.points) for e in exp))
            alone = [cumulative[0], cumulative[1] - cumulative[0], cumulative[2] - cumulative[1]]
            got = lanes[lane_id]["tiers"]
            assert [t["hit_blocks"] for t in got] == alone, (lane_id, sizes)
            assert [t["hit_tokens"] for t in got] == [a * case.block for a in alone]
            assert [t["bytes_loaded"] for t in got] == [0, alone[1] * block_bytes, alone[2] * block_bytes]


def test_misses_of_hybrid_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Golden 19 at 53248 B and inf: r2 hits 3 of 4 blocks (12 tokens), the 4th block is lost to
    the capacity (4 tokens); r1's 4 blocks have no restore point (16 tokens); 2 tail tokens."""
    from litehit.capacity import parse_capacities
    from litehit.misses import attribute_misses

    facts = golden19(tmp_path, capsys)
    _, parts = attribute_misses(facts, parse_capacities(["53248B", "inf"]))
    assert [(p.hit, p.evicted, p.cold_or_expired, p.tail, p.input_tokens) for p in parts] == [
        (12, 4, 16, 2, 34),
        (16, 0, 16, 2, 34),
    ]
    code, _, err = run(["misses", str(facts), "--capacity-gb", "10blocks"], capsys)
    assert "hybrid lane" in one_error_line(code, err, "m1")


def test_plot_and_report_of_hybrid_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = golden19(tmp_path, capsys)
    code, _, err = run(["plot", str(facts), "-o", str(tmp_path / "plots")], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "hit_rate.png",
        "hit_rate.svg",
        "misses.png",
        "misses.svg",
    ]
    code, _, err = run(["report", str(facts), "-o", str(tmp_path / "report.html")], capsys)
    assert code == 0, err
    page = (tmp_path / "report.html").read_text()
    assert "m1" in page and "47.06%" in page


@pytest.mark.parametrize(
    "argv",
    [
        ["policies", "--capacity-gb", "1", "-o", "{tmp}/policies.json"],
        ["routes", "--replicas", "2", "-o", "{tmp}/routes/routes.json"],
        ["profile", "-o", "{tmp}/profile.json"],
    ],
    ids=["policies", "routes", "profile"],
)
def test_full_only_trace_commands_refuse_a_hybrid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         argv: list[str]) -> None:  # fmt: skip
    golden19(tmp_path, capsys)
    cfg = tmp_path / "g19" / "config.json"
    (tmp_path / "routes").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run([argv[0], str(cfg), *argv[1:]], capsys)
    one_error_line(code, err, "instances[0].linear_step", "m1")
    assert not any((tmp_path / name).exists() for name in ("policies.json", "profile.json", "routes/routes.json"))


def _mutate_step(value: int) -> Any:
    return lambda inst: inst.update(linear_step=value)


def _no_linear_group(inst: dict[str, Any]) -> None:
    inst["optimizer_state_info"]["linear_location_spec_group_name"] = ""


def _drop_linear_group(inst: dict[str, Any]) -> None:
    del inst["optimizer_state_info"]["linear_location_spec_group_name"]


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (_mutate_step(6), "instances[0].linear_step",
         "linear_step=6 tokens is not a multiple of block_size=4 for instance[m1]"),
        (_mutate_step(0), "instances[0].optimizer_state_info.linear_location_spec_group_name",
         "full-attention instance[m1] must not configure a linear/Mamba spec group"),
        (_no_linear_group, "instances[0].optimizer_state_info.linear_location_spec_group_name",
         "linear instance[m1] requires a non-empty Mamba spec group"),
        (_drop_linear_group, "instances[0].optimizer_state_info.linear_location_spec_group_name",
         "linear instance[m1] requires a non-empty Mamba spec group"),
    ],
    ids=["step-not-multiple", "step0-with-linear-group", "step-without-linear-group", "step-without-linear-key"],
)  # fmt: skip
def test_replay_refuses_bad_hybrid_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any,
                                           field: str, message: str) -> None:  # fmt: skip
    trace = write_rows(tmp_path / "trace.jsonl", [req("r1", 1000, [1, 2, 3, 4], 17)])
    inst = copy.deepcopy(hybrid_instance("m1"))
    mutate(inst)
    cfg = config(trace, tmp_path / "out", instances=[inst], trace_format="standard")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, _, err = run(["replay", str(tmp_path / "config.json")], capsys)
    one_error_line(code, err, field, message)
    assert not (tmp_path / "out" / "litehit_facts.csv").exists()


def test_the_shorthand_flags_make_hybrid_lanes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--linear-step / --linear-state-bytes: every lane hybrid, the same facts as the explicit
    config of golden 19 (block bytes 16384, state 4096, a state every 12 tokens)."""
    golden = golden19(tmp_path, capsys)
    trace = tmp_path / "g19" / "trace.jsonl"
    assert trace.exists()
    out = tmp_path / "short"
    code, _, err = run(["replay", str(trace), "--format", "standard", "--block-size", "4", "--block-bytes", "16384",
                        "--linear-step", "12", "--linear-state-bytes", "4096", "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    lines = (out / "litehit_facts.csv").read_text().splitlines()
    want = golden.read_text().splitlines()
    assert [line.replace(",b4,", ",m1,") for line in lines] == want


@pytest.mark.parametrize(
    ("flags", "flag", "words"),
    [
        (["--linear-step", "12"], "--linear-step", "needs --linear-state-bytes too"),
        (["--linear-state-bytes", "4096"], "--linear-state-bytes", "needs --linear-step too"),
        (["--linear-step", "6", "--linear-state-bytes", "4096"], "--linear-step", "multiple of the block size 4"),
        (["--linear-step", "12", "--linear-state-bytes", "0"], "--linear-state-bytes", "positive integer"),
    ],
)
def test_the_shorthand_flags_refuse_bad_values(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                                               flag: str, words: str) -> None:  # fmt: skip
    golden19(tmp_path, capsys)
    trace = tmp_path / "g19" / "trace.jsonl"
    code, stdout, err = run(["replay", str(trace), "--format", "standard", "--block-size", "4", *flags,
                             "-o", str(tmp_path / "bad")], capsys)  # fmt: skip
    assert code == 1 and "Traceback" not in err + stdout
    assert err.startswith(f"litehit: error: {flag}: ") and words in err, err
    assert not (tmp_path / "bad" / "litehit_facts.csv").exists()


def test_a_hybrid_split_in_row_chunks_equals_one_pass(case: Replayed, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hybrid lane's per-request projections are bounded by chunks of rows (a plan evaluates
    hundreds of configurations): 64-row chunks give the one-pass sums exactly."""
    import litehit.tiers.split as split
    from litehit.capacity import CapacitySlot
    from litehit.tiers.config import TierMode
    from litehit.tiers.lanes import load_lanes

    lanes = load_lanes(case.facts, byte_steps=True)
    configs = [[CapacitySlot(c / 2**30, "bytes", c), CapacitySlot(-1.0)] for c in (0, 4096, 65536, 1 << 20)]
    for mode in (TierMode.EXCLUSIVE, TierMode.INCLUSIVE):
        whole = [split.split_lane(lane, configs, mode) for lane in lanes]
        monkeypatch.setattr(split, "STEP_NUMBERS", 1)  # chunks of max(64, 1 // ...) = 64 rows
        chunked = [split.split_lane(lane, configs, mode) for lane in lanes]
        monkeypatch.undo()
        assert all(lane.hybrid and lane.requests > 64 for lane in lanes)
        for a, b in zip(whole, chunked, strict=True):
            assert (a.hit_blocks == b.hit_blocks).all() and (a.bytes_loaded == b.bytes_loaded).all()


def test_the_tiers_table_names_a_finite_tier_without_block_count() -> None:
    """A lane whose rows differ in block size has no block count for `1blocks` (each row converts
    on its own): the table shows the capacity as given, and inf only for an infinite tier."""
    from litehit.cli.tiers import print_tiers

    tier = {"capacity_blocks": None, "hit_rate": 0.1, "cumulative_hit_rate": 0.1, "bytes_loaded": 0}
    doc = {
        "mode": "exclusive",
        "tiers": [
            {"name": "hbm", "capacity": "1blocks", "capacity_bytes": None},
            {"name": "dram", "capacity": "Inf", "capacity_bytes": None},
        ],
        "lanes": [
            {
                "lane": "m",
                "requests": 2,
                "block_size": None,
                "block_bytes": None,
                "hit_rate": 0.2,
                "tiers": [{**tier, "name": "hbm"}, {**tier, "name": "dram"}],
                "categories": {},
            }
        ],
        "constants": {},
        "notes": [],
    }
    out = io.StringIO()
    print_tiers(doc, out)
    rows = [
        line.split() for line in out.getvalue().splitlines() if line.startswith("  hbm") or line.startswith("  dram")
    ]
    assert rows[0][:2] == ["hbm", "1blocks"] and rows[1][:2] == ["dram", "inf"]
