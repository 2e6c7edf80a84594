"""``litehit routes`` (the state-free routers) against a naive reference (tests/support/routes_oracle.py,
nothing shared with the engine): the replica of every request, each replica's facts row for row
(= a plain ``litehit replay`` of the sub-trace the oracle assigns to it), the per-replica token sums,
the aggregate hit rate and the load imbalance at fixed per-replica capacities (a naive LRU per
replica), the exact curve over every capacity, and the refused inputs."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers import write_rows
from routes_oracle import MASK, Read, assign, hit_rate_at, reads_of, simulate, splitmix64, summary, to_int64

from litehit.cli import main
from litehit.routes.result import RoutesResult

NS = 10**9
ROUTERS = ("round_robin", "random", "session", "prefix_hash")
TRACE_BLOCK = 4
BYTES_PER_TOKEN = 2048  # the replay's default KV bytes per token


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


# ---------------------------------------------------------------------------------------------
# traces


@dataclass(frozen=True)
class Case:
    name: str
    seed: int
    replicas: int
    lane_block: int = 4
    ttl: int = 0  # seconds
    prefix_hash: bool = False
    prefix_blocks: int = 1
    router_seed: int = 0
    requests: int = 120
    model: str | None = None


def tree_trace(case: Case) -> list[dict[str, Any]]:
    """A prefix tree of requests (branches, repeats, new roots), some without keys, repeated
    timestamps, a few ``get`` reads, ``write`` rows (not requests) and rows without a trace id.
    Without prefix hashing the keys are already chained: one random 64-bit id per tree prefix
    (written as uint64 or as the equal int64, both forms of the same key); with it, the keys are
    small raw per-level values (the rolling hash makes the chain)."""
    rng = random.Random(case.seed)
    ids: dict[tuple[int, ...], int] = {}
    paths: list[list[int]] = []
    rows: list[dict[str, Any]] = []
    t = NS
    for i in range(case.requests):
        roll = rng.random()
        if roll < 0.08:
            path: list[int] = []
        elif not paths or roll < 0.22:
            path = [rng.randrange(1000)]
        else:
            base = rng.choice(paths[-8:]) if rng.random() < 0.7 else rng.choice(paths)
            path = base[: rng.randint(1, max(1, len(base)))] + [
                rng.randrange(3) for _ in range(rng.choice((0, 1, 2, 3)))
            ]
        path = path[:9]
        if path:
            paths.append(path)
        if case.prefix_hash:
            keys = list(path)
        else:
            keys = []
            for j in range(len(path)):
                v = ids.setdefault(tuple(path[: j + 1]), rng.getrandbits(64))
                keys.append(to_int64(v) if v >> 63 and rng.random() < 0.5 else v)
        length = TRACE_BLOCK * len(keys) + rng.randrange(TRACE_BLOCK)
        if length == 0:
            length = rng.randint(1, TRACE_BLOCK - 1)
        row: dict[str, Any] = {
            "type": "get" if rng.random() < 0.1 else "request",
            "instance_id": rng.choice(("pod-a", "pod-b", "pod-c")),
            "trace_id": f"q{i}",
            "timestamp_ns": t,
            "keys": keys,
            "input_len": length,
        }
        if rng.random() < 0.05:
            del row["trace_id"]
        rows.append(row)
        if rng.random() < 0.1:
            rows.append({"type": "write", "instance_id": "pod-a", "trace_id": f"w{i}", "timestamp_ns": t,
                         "keys": keys[:1]})  # fmt: skip
        t += int(rng.choice((0, 0, 0.5, 1, 2, 4)) * NS)
    return rows


def trace_flags(case: Case) -> list[str]:
    flags = ["--format", "standard", "--block-size", str(TRACE_BLOCK), "--block-sizes", str(case.lane_block),
             "--ttl-seconds", str(case.ttl)]  # fmt: skip
    flags.append("--prefix-hash" if case.prefix_hash else "--no-prefix-hash")
    if case.model:
        flags += ["--model", case.model]
    return flags


def replay_facts(trace: Path, case: Case, out: Path) -> tuple[list[str], list[dict[str, str]]]:
    assert main(["replay", str(trace), *trace_flags(case), "-o", str(out)]) == 0
    return read_csv(out / "litehit_facts.csv")


def expected_trace_id(rd: Read) -> str:
    return rd.row.get("trace_id") or f"trace_{rd.row['instance_id']}_{rd.ts}"


def facts_path(routes_json: Path, entry: dict[str, Any]) -> Path:
    """The facts file of a router entry: a name (or path) relative to the folder of routes.json."""
    return routes_json.parent / entry["facts"]


# ---------------------------------------------------------------------------------------------
# one routes run per case, shared by the tests

CAPACITIES = ["0blocks", "1blocks", "3blocks", "7blocks", "16KiB", "1MiB", "inf"]
WINDOW_S = 2


@dataclass
class Routed:
    case: Case
    folder: Path
    trace: Path
    rows: list[dict[str, Any]]
    reads: list[Read]
    doc: dict[str, Any]
    routes_json: Path

    def router(self, name: str) -> dict[str, Any]:
        (entry,) = [r for r in self.doc["routers"] if r["router"] == name]
        return entry

    def facts(self, name: str) -> Path:
        return facts_path(self.routes_json, self.router(name))

    def replicas(self, name: str) -> list[int]:
        return assign(self.reads, name, self.case.replicas, seed=self.case.router_seed,
                      prefix_blocks=self.case.prefix_blocks)  # fmt: skip


CASES = [
    Case("n2-plain", seed=1, replicas=2),
    Case("n3-ttl-hash", seed=2, replicas=3, ttl=3, prefix_hash=True, router_seed=12345),
    Case("n5-reblock", seed=3, replicas=5, lane_block=8, prefix_blocks=2, router_seed=(1 << 64) - 1),
    Case("n3-hash-k3-model", seed=4, replicas=3, prefix_hash=True, prefix_blocks=3, requests=90, model="Llama-3.1-8B"),
    Case("n1", seed=5, replicas=1, ttl=2, prefix_hash=True, requests=80),
]
_routed: dict[str, Routed] = {}  # one routes run per case for the whole module


def get_routed(case: Case, tmp_path_factory: pytest.TempPathFactory) -> Routed:
    if case.name not in _routed:
        folder = tmp_path_factory.mktemp(case.name)
        rows = tree_trace(case)
        trace = write_rows(folder / "trace.jsonl", rows)
        (folder / "routes").mkdir()
        out = folder / "routes" / "routes.json"
        argv = ["routes", str(trace), *trace_flags(case), "--replicas", str(case.replicas),
                "--routers", ",".join(ROUTERS), "--capacity", *CAPACITIES, "--seed", str(case.router_seed),
                "--prefix-blocks", str(case.prefix_blocks), "--load-window-s", str(WINDOW_S), "-o", str(out)]  # fmt: skip
        assert main(argv) == 0
        reads = reads_of(rows, TRACE_BLOCK, case.lane_block, case.prefix_hash)
        _routed[case.name] = Routed(case, folder, trace, rows, reads, json.loads(out.read_text()), out)
    return _routed[case.name]


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def r(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Routed:
    return get_routed(request.param, tmp_path_factory)


# ---------------------------------------------------------------------------------------------
# the oracle itself


def test_oracle_routers_by_hand() -> None:
    # SplitMix64 seeded 0: the published first output
    assert splitmix64(0, 0) == 0xE220A8397B1DCDAF
    rows = [
        {"type": "request", "keys": [-1, 5], "timestamp_ns": 1, "input_len": 8},
        {"type": "write", "keys": [3], "timestamp_ns": 1},
        {"type": "get", "keys": [], "timestamp_ns": 2, "input_len": 3},
        {"type": "request", "keys": [(1 << 64) - 1], "timestamp_ns": 2, "input_len": 5},
        {"type": "request", "keys": [7, 9, 11], "timestamp_ns": 3, "input_len": 12},
    ]
    reads = reads_of(rows, 4, 4, False)
    assert assign(reads, "round_robin", 3) == [0, 1, 2, 0]
    assert assign(reads, "session", 3) == [MASK % 3, 0, MASK % 3, 7 % 3]
    assert assign(reads, "prefix_hash", 4, prefix_blocks=2) == [5 % 4, 0, MASK % 4, 9 % 4]
    assert assign(reads, "random", 5, seed=9) == [splitmix64(9, i) % 5 for i in range(4)]
    # reverse commit: [A,B,C] then [A] then [C] at capacity 3 -> C is the LRU end but resident
    reads = reads_of([{"type": "request", "keys": k, "timestamp_ns": 1, "input_len": 4 * len(k)}
                      for k in ([1, 2, 3], [1, 2, 4], [1, 2, 3], [1, 5], [1, 5])], 4, 4, False)  # fmt: skip
    assert simulate(reads, [0] * 5, 1, 2) == [0, 2, 2, 1, 2]
    assert simulate(reads, [0] * 5, 1, None) == [0, 2, 3, 1, 2]


# ---------------------------------------------------------------------------------------------
# 1. each replica's facts = a plain replay of the sub-trace the oracle assigns to it


@pytest.mark.parametrize("router", ROUTERS)
def test_replica_facts_equal_the_replay_of_its_sub_trace(r: Routed, router: str) -> None:
    n = r.case.replicas
    facts = r.facts(router)
    assert facts.resolve() == (r.routes_json.parent / f"routes_{router}_facts.csv").resolve()
    header, rows = read_csv(facts)
    replicas = r.replicas(router)
    # one row per read request, in input order, on the oracle's lane
    assert {int(row["block_bytes"]) for row in rows} == {block_bytes_of(r.case)}
    assert [(row["trace_id"], int(row["timestamp_ns"])) for row in rows] == [
        (expected_trace_id(rd), rd.ts) for rd in r.reads
    ]
    assert [row["instance_id"] for row in rows] == [f"r{j}" for j in replicas]
    for j in range(n):
        mine = [rd.row for rd, k in zip(r.reads, replicas, strict=True) if k == j]
        got = [row for row in rows if row["instance_id"] == f"r{j}"]
        if not mine:
            assert got == []
            continue
        sub = write_rows(r.folder / f"sub_{router}_{j}.jsonl", mine)
        sub_header, want = replay_facts(sub, r.case, r.folder / f"sub_{router}_{j}")
        assert header == sub_header
        columns = [c for c in header if c != "instance_id"]
        assert [[row[c] for c in columns] for row in got] == [[row[c] for c in columns] for row in want], (router, j)


# ---------------------------------------------------------------------------------------------
# 2. per-replica sums, aggregate hit rate and load imbalance at fixed capacities


def capacity_blocks(text: str, block_bytes: int) -> int | None:
    if text == "inf":
        return None
    if text.endswith("blocks"):
        return int(text.removesuffix("blocks"))
    for unit, scale in (("KiB", 1 << 10), ("MiB", 1 << 20)):
        if text.endswith(unit):
            return int(text.removesuffix(unit)) * scale // block_bytes
    raise ValueError(text)


def block_bytes_of(case: Case) -> int:
    per_token = 131072 if case.model == "Llama-3.1-8B" else BYTES_PER_TOKEN  # 32 layers x 8 KV heads x 128 x 2 x bf16
    return per_token * case.lane_block


def test_document_shape(r: Routed) -> None:
    doc = r.doc
    RoutesResult.model_validate(doc)  # the documented schema, no field more or less
    assert doc["replicas"] == r.case.replicas
    assert [e["router"] for e in doc["routers"]] == list(ROUTERS)
    for entry in doc["routers"]:
        assert [c["capacity"] for c in entry["capacities"]] == CAPACITIES
        for c in entry["capacities"]:
            want = capacity_blocks(c["capacity"], block_bytes_of(r.case))
            if want is not None:
                assert c["capacity_blocks"] == want, c["capacity"]


@pytest.mark.parametrize("router", ROUTERS)
def test_sums_and_imbalance_equal_the_naive_lru(r: Routed, router: str) -> None:
    n, block = r.case.replicas, r.case.lane_block
    replicas = r.replicas(router)
    rr = r.router("round_robin")
    for got in r.router(router)["capacities"]:
        cap = capacity_blocks(got["capacity"], block_bytes_of(r.case))
        hits = simulate(r.reads, replicas, n, cap, r.case.ttl * NS)
        want = summary(r.reads, replicas, n, hits, block, WINDOW_S * NS)
        label = (router, got["capacity"])
        assert got["replicas"] == want["replicas"], label
        assert (got["hit_tokens"], got["input_tokens"]) == (want["hit_tokens"], want["input_tokens"]), label
        assert got["hit_rate"] == pytest.approx(want["hit_rate"], rel=1e-12, abs=1e-15), label
        assert got["imbalance"]["max_over_mean"] == pytest.approx(want["imbalance"]["max_over_mean"], rel=1e-12), label
        assert got["imbalance"]["p99_over_mean"] == pytest.approx(want["imbalance"]["p99_over_mean"], rel=1e-12), label
        (same,) = [c for c in rr["capacities"] if c["capacity"] == got["capacity"]]
        assert got["vs_round_robin"] == pytest.approx(got["hit_rate"] - same["hit_rate"], abs=1e-12), label
    if router == "round_robin":
        assert all(c["vs_round_robin"] == pytest.approx(0.0, abs=1e-15) for c in rr["capacities"])


def test_vs_round_robin_is_null_without_round_robin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    r = get_routed(CASES[0], tmp_path_factory)
    out = tmp_path / "routes.json"
    argv = ["routes", str(r.trace), *trace_flags(r.case), "--replicas", "2", "--routers", "session,random",
            "--capacity", "3blocks", "inf", "-o", str(out)]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [e["router"] for e in doc["routers"]] == ["session", "random"]
    for entry in doc["routers"]:
        assert [c["vs_round_robin"] for c in entry["capacities"]] == [None, None]
        # the same numbers as in the four-router run
        (full,) = [e for e in r.doc["routers"] if e["router"] == entry["router"]]
        by_cap = {c["capacity"]: c for c in full["capacities"]}
        for c in entry["capacities"]:
            assert c["hit_tokens"] == by_cap[c["capacity"]]["hit_tokens"]
            assert c["replicas"] == by_cap[c["capacity"]]["replicas"]


def test_imbalance_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two replicas, round robin, window 10 s: w0 holds r0 (12 tokens, a cold 3-block request)
    and r1 (4 tokens); w1 only r0's repeat (hit 2 of 3 blocks at inf: 12 - 8 = 4... plus a
    1-token tail): prefill per replica r0 = 13 + 5, r1 = 4 -> max/mean = 18 / 11."""
    rows = [
        {"type": "request", "instance_id": "x", "trace_id": "a", "timestamp_ns": 1 * NS, "keys": [1, 2, 3], "input_len": 13},
        {"type": "request", "instance_id": "x", "trace_id": "b", "timestamp_ns": 2 * NS, "keys": [9], "input_len": 4},
        {"type": "request", "instance_id": "x", "trace_id": "c", "timestamp_ns": 15 * NS, "keys": [1, 2, 7], "input_len": 13},
    ]  # fmt: skip
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "routes.json"
    argv = ["routes", str(trace), "--format", "standard", "--block-size", "4", "--block-sizes", "4", "--replicas",
            "2", "--routers", "round_robin", "--capacity", "inf", "0blocks", "--load-window-s", "10", "-o", str(out)]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    inf, zero = json.loads(out.read_text())["routers"][0]["capacities"]
    assert [p["prefill_tokens"] for p in inf["replicas"]] == [13 + 5, 4]
    assert [p["requests"] for p in inf["replicas"]] == [2, 1]
    assert inf["hit_tokens"] == 8 and inf["input_tokens"] == 30
    assert inf["hit_rate"] == pytest.approx(8 / 30)
    assert inf["imbalance"]["max_over_mean"] == pytest.approx(18 / 11)
    # windows: w0 loads (13, 4) -> 13 / 8.5; w1 loads (5, 0) -> 5 / 2.5 = 2; p99 of 2 values = the max
    assert inf["imbalance"]["p99_over_mean"] == pytest.approx(2.0)
    assert zero["hit_tokens"] == 0 and zero["imbalance"]["max_over_mean"] == pytest.approx(26 / 15)


# ---------------------------------------------------------------------------------------------
# 3. one replica: every router is the plain replay


def test_one_replica_every_router_is_the_plain_replay(tmp_path_factory: pytest.TempPathFactory) -> None:
    case = CASES[-1]
    assert case.replicas == 1
    r = get_routed(case, tmp_path_factory)
    header, want = replay_facts(r.trace, case, r.folder / "plain")
    columns = [c for c in header if c != "instance_id"]
    for router in ROUTERS:
        got_header, got = read_csv(r.facts(router))
        assert got_header == header
        assert {row["instance_id"] for row in got} == {"r0"}
        assert [[row[c] for c in columns] for row in got] == [[row[c] for c in columns] for row in want], router
        for c in r.router(router)["capacities"]:
            assert c["imbalance"]["max_over_mean"] == pytest.approx(1.0)
            assert c["imbalance"]["p99_over_mean"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# 4. the curve: exact at every per-replica capacity


@pytest.mark.parametrize("router", ROUTERS)
def test_curve_is_the_naive_hit_rate_at_every_capacity(r: Routed, router: str) -> None:
    n, block, ttl = r.case.replicas, r.case.lane_block, r.case.ttl * NS
    replicas = r.replicas(router)
    columns = r.router(router)["curve"]
    assert sorted(columns) == ["capacity_blocks", "hit_tokens", "input_tokens"]
    assert columns["input_tokens"] == sum(rd.input_len for rd in r.reads)
    curve = [
        {"capacity_blocks": c, "hit_rate": Fraction(h, columns["input_tokens"])}
        for c, h in zip(columns["capacity_blocks"], columns["hit_tokens"], strict=True)
    ]
    caps = [p["capacity_blocks"] for p in curve]
    assert caps and caps[0] == 0 and caps == sorted(set(caps)), caps
    plateau = hit_rate_at(r.reads, replicas, n, None, block, ttl)
    top = max(caps) + 2
    exact = [hit_rate_at(r.reads, replicas, n, c, block, ttl) for c in range(top + 1)]
    # points exactly where the rate changes, ending at the plateau
    changes = [0] + [c for c in range(1, top + 1) if exact[c] != exact[c - 1]]
    assert caps == changes, (router, caps, changes)
    assert exact[caps[-1]] == plateau
    for c in range(top + 1):
        point = [p for p in curve if p["capacity_blocks"] <= c][-1]
        assert point["hit_rate"] == exact[c], (router, c)  # exact: integer hit tokens


# ---------------------------------------------------------------------------------------------
# default output path, the plot


def test_default_output_is_routes_json_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"type": "request", "instance_id": "x", "trace_id": f"t{i}", "timestamp_ns": NS + i, "keys": [1, 2][: i % 3],
             "input_len": 4 * (i % 3) + 1} for i in range(12)]  # fmt: skip
    trace = write_rows(tmp_path / "t.jsonl", rows)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["routes", str(trace), "--format", "standard", "--block-size", "4", "--replicas", "2",
                        "--routers", "round_robin,session", "--plot", str(tmp_path / "r.png")], capsys)  # fmt: skip
    assert code == 0, err
    doc = json.loads((tmp_path / "routes.json").read_text())
    for entry in doc["routers"]:
        facts = facts_path(tmp_path / "routes.json", entry)
        assert facts.resolve() == (tmp_path / f"routes_{entry['router']}_facts.csv").resolve()
        assert len(read_csv(facts)[1]) == 12
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# 5. refused input: exit 1, one stderr line naming the flag, nothing written


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [{"type": "request", "instance_id": "x", "trace_id": f"t{i}", "timestamp_ns": NS + i, "keys": [1, 2][: i % 3],
             "input_len": 4 * (i % 3) + 1} for i in range(6)]  # fmt: skip
    return write_rows(tmp_path_factory.mktemp("bad") / "t.jsonl", rows)


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--replicas", "0"], "--replicas"),
        (["--replicas", "1025"], "--replicas"),
        (["--replicas", "2", "--routers", "round_robin,sticky"], "--routers"),
        (["--replicas", "2", "--routers", "least_loaded"], "--capacity"),  # simulated: needs capacities
        (["--replicas", "2", "--routers", "cache_aware,round_robin"], "--capacity"),
        (
            ["--replicas", "2", "--routers", "cache_aware", "--capacity", "inf", "--balance-threshold", "-1"],
            "--balance-threshold",
        ),
        (
            ["--replicas", "2", "--routers", "cache_aware", "--capacity", "inf", "--balance-threshold", "0.1234567891"],
            "--balance-threshold",
        ),
        (
            ["--replicas", "2", "--routers", "cache_aware", "--capacity", "inf", "--load-window-s", "0"],
            "--load-window-s",
        ),
        (["--replicas", "2", "--prefix-blocks", "0"], "--prefix-blocks"),
        (["--replicas", "2", "--block-sizes", "4,8"], "--block-sizes"),
    ],
)
def test_bad_input(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], flag: str
) -> None:
    out = tmp_path / "routes.json"
    code, stdout, err = run(["routes", str(small_trace), "--format", "standard", "--block-size", "4", *extra,
                             "-o", str(out)], capsys)  # fmt: skip
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"litehit: error: {flag}"), err
    assert "Traceback" not in err + stdout
    assert list(tmp_path.iterdir()) == []


def test_replicas_at_the_limit_is_accepted(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "routes.json"
    code, _, err = run(["routes", str(small_trace), "--format", "standard", "--block-size", "4", "--replicas", "1024",
                        "--routers", "round_robin", "--capacity", "inf", "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    (entry,) = json.loads(out.read_text())["routers"]
    assert [p["requests"] for p in entry["capacities"][0]["replicas"]] == [1] * 6 + [0] * 1018


FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def session_number(text: str) -> int:
    """An id's session number as unsigned 64-bit: a canonical decimal integer (str(int) text)
    within 64 bits is its value, anything else the FNV-1a 64 hash of its UTF-8 bytes."""
    digits = text[1:] if text.startswith("-") else text
    canonical = digits.isdigit() and digits.isascii() and (digits == "0" or not digits.startswith("0"))
    if canonical and text != "-0" and -(1 << 63) <= int(text) < (1 << 64):
        return int(text) & MASK
    h = FNV_OFFSET
    for byte in text.encode():
        h = ((h ^ byte) * FNV_PRIME) & MASK
    return h


def chained_sessions(rows: list[dict[str, Any]]) -> list[int]:
    """Per row, its root session: the parent's root when the parent chat appeared earlier, else
    the parent itself; a row without parent (missing, null, -1) is its own root."""
    roots: dict[int, int] = {}
    out = []
    for row in rows:
        chat = session_number(str(row["chat_id"]))
        parent = row.get("parent_chat_id")
        if parent is None or parent == -1:
            root = chat
        else:
            key = session_number(str(parent))
            root = roots.get(key, key)
        roots[chat] = root
        out.append(root)
    return out


def chained_qwen_rows(seed: int) -> list[dict[str, Any]]:
    """Conversations whose turns name their parent: integer and string ids (some spelling the
    same integer), roots marked by -1, null or no field, and parents outside the trace."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    chats: list[Any] = []
    t = 0.0
    for i in range(160):
        style = rng.random()
        if not chats or style < 0.2:
            chat: Any = rng.choice([i, str(i + 10**6), f"s-{i}", (1 << 64) - 1 - i, -i - 1, f"00{i}"])
            parent: Any = rng.choice([-1, None, "missing", f"gone-{i % 7}", 987654321 + i % 5])
        else:
            chat = rng.choice([i + 5000, f"t{i}", str(i + 5000 + 10**6)])
            parent = rng.choice(chats[-12:])
            if isinstance(parent, int) and rng.random() < 0.5:
                parent = str(parent)  # the same chat, spelt as a string
        chats.append(chat)
        t += rng.choice((0.0, 0.25, 1.0))
        row: dict[str, Any] = {"chat_id": chat, "timestamp": round(t, 3), "input_length": 16 * 3 + 5,
                               "hash_ids": [rng.randrange(1 << 40) for _ in range(3)]}  # fmt: skip
        if parent != "missing":
            row["parent_chat_id"] = parent
        rows.append(row)
    return rows


@pytest.mark.parametrize("replicas", [1, 3, 7])
def test_session_on_qwen_follows_parent_chat_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], replicas: int
) -> None:
    rows = chained_qwen_rows(seed=replicas)
    trace = tmp_path / "qwen.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "routes.json"
    code, _, err = run(["routes", str(trace), "--format", "qwen_bailian", "--replicas", str(replicas),
                             "--routers", "round_robin,session", "--capacity", "inf", "-o", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert "parent_chat_id" in " ".join(doc["notes"])
    _, facts = read_csv(out.parent / "routes_session_facts.csv")
    assert [row["trace_id"] for row in facts] == [str(row["chat_id"]) for row in rows]
    assert [row["instance_id"] for row in facts] == [f"r{s % replicas}" for s in chained_sessions(rows)]
    # a conversation stays on one replica: a child is never routed apart from a parent seen before it
    lane_of = {}
    for row, fact in zip(rows, facts, strict=True):
        parent = row.get("parent_chat_id")
        if parent not in (None, -1) and session_number(str(parent)) in lane_of:
            assert fact["instance_id"] == lane_of[session_number(str(parent))]
        lane_of[session_number(str(row["chat_id"]))] = fact["instance_id"]


def test_qwen_parent_chat_id_of_a_wrong_type_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    trace.write_text(
        json.dumps({"chat_id": 1, "timestamp": 0, "input_length": 40, "hash_ids": [1, 2]}) + "\n"
        + json.dumps({"chat_id": 2, "parent_chat_id": [1], "timestamp": 1, "input_length": 40, "hash_ids": [1]})
        + "\n"
    )  # fmt: skip
    code, stdout, err = run(["routes", str(trace), "--format", "qwen_bailian", "--replicas", "2", "--routers",
                             "session", "-o", str(tmp_path / "routes.json")], capsys)  # fmt: skip
    assert code == 1 and "Traceback" not in err + stdout
    assert f"{trace}:2" in err and "parent_chat_id must be an integer, a string or null" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen.jsonl"]


def test_hit_rate_at_is_exact() -> None:
    """The oracle's own rate is a Fraction (the curve test compares change points exactly)."""
    reads = reads_of([{"type": "request", "keys": [1, 2], "timestamp_ns": 1, "input_len": 9}] * 2, 4, 4, False)
    assert hit_rate_at(reads, [0, 0], 1, None, 4) == Fraction(8, 18)


def test_schema_is_printed_and_takes_no_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["routes", "--schema"], capsys)
    assert code == 0
    schema = json.loads(out)
    assert schema == RoutesResult.model_json_schema()
    assert {"replicas", "routers", "options", "notes"} <= set(schema["properties"])
    code, _, err = run(["routes", str(tmp_path / "t.jsonl"), "--schema"], capsys)
    assert code == 1 and err.startswith("litehit: error: TRACE: --schema takes no trace"), err
    code, _, err = run(["routes", str(tmp_path / "t.jsonl")], capsys)
    assert code == 1 and err.startswith("litehit: error: --replicas:"), err
