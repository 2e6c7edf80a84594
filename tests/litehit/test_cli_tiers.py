"""``litehit tiers`` and ``litehit plan`` end to end (litehit.cli.main): the documents at -o are the
bytes of the functions the jobs call (tiers_document, plan_document), the small traces' numbers
are the naive multi-tier LRU's (tests/support/tiers_oracle.py) per lane and per request category,
the prefill constants are the flags', bad input is one stderr line naming the flag (no
traceback, nothing written), and every run is recorded (``litehit jobs --kind tiers|plan``)."""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, instance, write_rows
from test_cli_policies import qwen_trace
from tiers_oracle import LaneRows, capacity_in_blocks, naive_prefill, naive_tier_sums, simulate

from litehit.cli import main
from litehit.cli import tiers as tiers_cli
from litehit.settings import get_settings
from litehit.tiers.document import tiers_document
from litehit.tiers.lanes import load_lanes
from litehit.tiers.options import PlanOptions, TiersOptions
from litehit.tiers.planner import plan_document

NS = 10**9
PNG = b"\x89PNG\r\n\x1a\n"
MODEL = ["--model", "Llama-3.1-8B", "--gpu", "H100-SXM"]
# H100-SXM: 80 GB x 0.9 - 8.03e9 parameters x 2 B (bf16) = 55.94 GB spare for the KV cache
SPARE_BYTES = 72_000_000_000 - 16_060_000_000
PCIE_GEN4 = 16e9 * 16 * 128 / 130 / 8
PCIE_GEN5 = 32e9 * 16 * 128 / 130 / 8
CONSTANT_KEYS = {"formula", "model", "active_params", "layers", "heads", "head_dim", "gpu", "peak_flops", "mfu",
                 "overlap", "links"}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("LITEHIT_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield tmp_path / "home"
    get_settings.cache_clear()


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def dumped(document: dict[str, Any]) -> bytes:
    """The bytes a document is published as (indent 1, a final newline)."""
    return json.dumps(document, indent=1).encode() + b"\n"


# ---------------------------------------------------------------------------------------------
# inputs: the bundled trace's facts, and small traces with request categories


@pytest.fixture(scope="module")
def conversation_facts(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("conversation")
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(out)]) == 0
    return out / "litehit_facts.csv"


@dataclass
class Small:
    """A replayed small trace: its config, facts, and the oracle's view of each lane."""

    config: Path
    facts: Path
    rows: dict[str, LaneRows]
    ttl_ns: dict[str, int]
    categories: dict[str, list[str]]  # per lane, each request's category


def tree_paths(rng: random.Random, n: int) -> list[list[int]]:
    out: list[list[int]] = []
    for _ in range(n):
        if not out or rng.random() < 0.15:
            path = [1000 + len(out)]
        else:
            earlier = rng.choice(out[-6:]) if rng.random() < 0.7 else rng.choice(out)
            path = earlier[: rng.randint(1, len(earlier))]
        out.append((path + [rng.randrange(3) for _ in range(rng.choice((0, 1, 2, 3, 5)))])[:10])
    return out


STANDARD_LANES = (("s4", 4, (8192, 8192), 0), ("s8", 8, (16384, 16384), 3))  # id, block, sizes, TTL s


@pytest.fixture(scope="module")
def standard(tmp_path_factory: pytest.TempPathFactory) -> Small:
    """Two lanes (one re-blocked to 8 tokens, with a TTL) of a standard trace whose rows carry a
    category (chat, agent) or none (all)."""
    folder = tmp_path_factory.mktemp("standard")
    rng = random.Random(17)
    rows: list[tuple[int, int, dict[str, Any]]] = []
    oracle: dict[str, LaneRows] = {}
    categories: dict[str, list[str]] = {}
    for order, (name, block, sizes, _ttl) in enumerate(STANDARD_LANES):
        paths = tree_paths(rng, 90)
        times, t = [], NS
        for _ in paths:
            times.append(t)
            t += int(rng.choice((0, 0.5, 1, 2, 5)) * NS)
        lens = [4 * len(p) + rng.randrange(4) for p in paths]
        cats = [rng.choice(("chat", "agent", None)) for _ in paths]
        for i, (p, ts, n, cat) in enumerate(zip(paths, times, lens, cats, strict=True)):
            row: dict[str, Any] = {"type": "request", "instance_id": name, "trace_id": f"{name}-{i}",
                                   "timestamp_ns": ts, "keys": p, "input_len": n}  # fmt: skip
            if cat is not None:
                row["category"] = cat
            rows.append((ts, order, row))
        k = block // 4
        keys = [[tuple(p[: j + 1]) for j in range(len(p))][k - 1 :: k] for p in paths]
        oracle[name] = LaneRows(keys, times, lens, block, sum(sizes))
        categories[name] = [c or "all" for c in cats]
    rows.sort(key=lambda r: (r[0], r[1]))
    trace = write_rows(folder / "trace.jsonl", [r for _, _, r in rows])
    spec = config(
        trace,
        folder / "out",
        block_size=4,
        trace_format="standard",
        groups=[group(f"g-{n}", ttl, enable_prefix_hash=True) for n, _, _, ttl in STANDARD_LANES],
        instances=[instance(n, b, group=f"g-{n}", sizes=s) for n, b, s, _ in STANDARD_LANES],
    )
    path = folder / "config.json"
    path.write_text(json.dumps(spec))
    assert main(["replay", str(path)]) == 0
    ttl = {n: t * NS for n, _, _, t in STANDARD_LANES}
    return Small(path, folder / "out" / "litehit_facts.csv", oracle, ttl, categories)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Small:
    """A qwen_bailian trace (chats of several turns, text and image): categories type-turn."""
    folder = tmp_path_factory.mktemp("qwen")
    trace = folder / "qwen.jsonl"
    rows = qwen_trace(trace, seed=5)
    spec = config(
        trace,
        folder / "out",
        block_size=16,
        trace_format="qwen_bailian",
        groups=[group("g", enable_prefix_hash=False)],
        instances=[instance("q16", 16, group="g", sizes=(16384,))],
    )
    path = folder / "config.json"
    path.write_text(json.dumps(spec))
    assert main(["replay", str(path)]) == 0
    times = [round(float(r["timestamp"]) * NS) for r in rows]  # type: ignore[arg-type]
    lane = LaneRows([list(r["hash_ids"]) for r in rows], times, [int(r["input_length"]) for r in rows], 16, 16384)  # type: ignore[call-overload]
    buckets = {1: "1", 2: "2"}
    cats = [f"{r['type']}-{buckets.get(int(r['turn']), '3+')}" for r in rows]  # type: ignore[call-overload]
    return Small(path, folder / "out" / "litehit_facts.csv", {"q16": lane}, {"q16": 0}, {"q16": cats})


# ---------------------------------------------------------------------------------------------
# litehit tiers


def tiers_options(tiers: list[tuple[str, str]], mode: str = "exclusive", **extra: Any) -> TiersOptions:
    return TiersOptions.model_validate({"tiers": [{"name": n, "capacity": c} for n, c in tiers], "mode": mode, **extra})


def test_tiers_writes_the_document_and_the_plot(
    conversation_facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot = tmp_path / "tiers.json", tmp_path / "tiers.png"
    argv = ["tiers", str(conversation_facts), "--tier", "hbm=1GiB", "--tier", "dram=8GiB", "--tier", "ssd=inf"]
    code, stdout, err = run([*argv, "-o", str(out), "--plot", str(plot)], capsys)
    assert code == 0, err
    assert stdout.endswith(f"tiers: {out}\n")
    assert "lane b512 (12,031 requests, 512-token blocks of 1 MiB)" in stdout
    assert plot.read_bytes()[:8] == PNG
    doc = json.loads(out.read_bytes())
    # the documented keys (litehit.tiers.document)
    assert set(doc) == {"mode", "tiers", "constants", "lanes", "notes"}
    assert doc["mode"] == "exclusive" and doc["constants"] == {}
    assert doc["tiers"] == [
        {"name": "hbm", "capacity": "1GiB", "capacity_bytes": 1 << 30},
        {"name": "dram", "capacity": "8GiB", "capacity_bytes": 8 << 30},
        {"name": "ssd", "capacity": "inf", "capacity_bytes": None},
    ]
    (lane,) = doc["lanes"]
    assert set(lane) == {"lane", "requests", "input_tokens", "hit_rate", "block_size", "block_bytes", "hybrid",
                         "tiers", "categories"}  # fmt: skip
    assert lane["hybrid"] is False
    assert (lane["lane"], lane["requests"], lane["block_size"], lane["block_bytes"]) == ("b512", 12031, 512, 1 << 20)
    assert lane["categories"] == {}
    rows = lane["tiers"]
    assert [t["capacity_blocks"] for t in rows] == [1024, 8192, None]
    for t in rows:
        assert set(t) == {"name", "capacity_blocks", "hit_blocks", "hit_tokens", "hit_rate", "cumulative_hit_rate",
                          "bytes_loaded"}  # fmt: skip
        assert t["hit_tokens"] == 512 * t["hit_blocks"] and t["hit_rate"] == t["hit_tokens"] / lane["input_tokens"]
    assert rows[0]["bytes_loaded"] == 0 and rows[1]["bytes_loaded"] == rows[1]["hit_blocks"] << 20
    assert (
        rows[-1]["cumulative_hit_rate"] == lane["hit_rate"] == sum(t["hit_tokens"] for t in rows) / lane["input_tokens"]
    )
    assert all(t["hit_blocks"] > 0 for t in rows)
    # the same numbers as the function the tiers job calls, byte for byte
    direct = tiers_document(
        load_lanes(conversation_facts), tiers_options([("hbm", "1GiB"), ("dram", "8GiB"), ("ssd", "inf")])
    )
    assert out.read_bytes() == dumped(direct)
    # inclusive: other numbers, the same way
    out2 = tmp_path / "inclusive.json"
    code, _, err = run([*argv, "--mode", "inclusive", "-o", str(out2), "--plot", str(tmp_path / "i.svg")], capsys)
    assert code == 0, err
    assert b"<svg" in (tmp_path / "i.svg").read_bytes()[:2000]
    inclusive = tiers_document(
        load_lanes(conversation_facts),
        tiers_options([("hbm", "1GiB"), ("dram", "8GiB"), ("ssd", "inf")], "inclusive"),
    )
    assert out2.read_bytes() == dumped(inclusive)
    got = json.loads(out2.read_bytes())
    assert got["mode"] == "inclusive"
    # nested LRUs: tiers 1..i serve what one LRU of tier i's capacity hits (exclusive: of the sum),
    # so hbm serves the same, dram less (an LRU of 8 GiB against one of 1 + 8 GiB)
    assert got["lanes"][0]["tiers"][0]["hit_blocks"] == rows[0]["hit_blocks"]
    assert got["lanes"][0]["hit_rate"] == lane["hit_rate"]  # the last tier is infinite in both modes
    assert got["lanes"][0]["tiers"][1]["hit_blocks"] < rows[1]["hit_blocks"]


def test_tiers_prefill_constants_follow_the_flags(
    conversation_facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    argv = ["tiers", str(conversation_facts), "--tier", "hbm=spare", "--tier", "dram=64GiB", "--tier", "ssd=inf",
            *MODEL, "-o", str(out)]  # fmt: skip
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    assert "prefill model (an estimate, not a measurement): Llama-3.1-8B" in stdout
    doc = json.loads(out.read_bytes())
    constants = doc["constants"]
    assert set(constants) >= CONSTANT_KEYS
    assert (constants["model"], constants["gpu"], constants["mfu"], constants["overlap"]) == (
        "Llama-3.1-8B", "H100-SXM", 0.4, False,
    )  # fmt: skip
    assert (constants["active_params"], constants["layers"], constants["heads"], constants["head_dim"]) == (
        8_030_000_000, 32, 32, 128,
    )  # fmt: skip
    assert constants["peak_flops"] == 989.4e12
    assert constants["links"] == {
        "dram": {"link": "pcie-gen5", "bandwidth_bytes_per_s": PCIE_GEN5, "latency_s": 10e-6},
        "ssd": {"link": "nvme", "bandwidth_bytes_per_s": 7e9, "latency_s": 100e-6},
    }
    # spare: the bytes the weights leave, printed, and what the hbm tier holds
    assert constants["spare"] == {
        "hbm": {
            "spare_bytes": SPARE_BYTES,
            "rule": "GPU memory x gpu_memory_utilization - total parameters x 2 B (bf16 weights)",
            "gpu_memory_utilization": 0.9,
        }
    }
    assert doc["tiers"][0] == {"name": "hbm", "capacity": "spare", "capacity_bytes": SPARE_BYTES}
    (lane,) = doc["lanes"]
    assert lane["tiers"][0]["capacity_blocks"] == SPARE_BYTES // (1 << 20)
    prefill = lane["prefill_s"]
    assert set(prefill) == {"mean", "p50", "p90", "p99", "uncached_mean", "uncached_p50", "uncached_p90",
                            "uncached_p99", "gpu_s_per_hour", "uncached_gpu_s_per_hour", "saved_share"}  # fmt: skip
    assert 0 < prefill["mean"] < prefill["uncached_mean"] and 0 < prefill["saved_share"] < 1
    # every link flag, and a smaller utilization for spare
    out2 = tmp_path / "t2.json"
    argv = ["tiers", str(conversation_facts), "--tier", "hbm=spare", "--tier", "dram=64GiB", "--tier", "ssd=inf",
            *MODEL, "--link", "dram=pcie-gen4", "--bandwidth", "ssd=12GB/s", "--latency", "ssd=80us",
            "--gpu-memory-utilization", "0.8", "--mfu", "0.5", "--overlap", "-o", str(out2)]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    doc2 = json.loads(out2.read_bytes())
    c2 = doc2["constants"]
    assert c2["links"]["dram"] == {"link": "pcie-gen4", "bandwidth_bytes_per_s": PCIE_GEN4, "latency_s": 10e-6}
    ssd = c2["links"]["ssd"]
    assert (ssd["link"], ssd["bandwidth_bytes_per_s"]) == ("nvme (overridden)", 12e9)
    assert ssd["latency_s"] == pytest.approx(80e-6, rel=1e-12)  # 80 x 1e-6 is 7.999999999999999e-05
    assert (c2["mfu"], c2["overlap"]) == (0.5, True)
    assert c2["spare"]["hbm"]["spare_bytes"] == 64_000_000_000 - 16_060_000_000
    assert c2["spare"]["hbm"]["gpu_memory_utilization"] == 0.8
    direct = tiers_document(
        load_lanes(conversation_facts),
        TiersOptions.model_validate(
            {
                "tiers": [
                    {"name": "hbm", "capacity": "spare"},
                    {"name": "dram", "capacity": "64GiB", "link": "pcie-gen4"},
                    {"name": "ssd", "capacity": "inf", "bandwidth_bytes_per_s": 12e9, "latency_s": ssd["latency_s"]},
                ],
                "prefill": {
                    "model": "Llama-3.1-8B",
                    "gpu": "H100-SXM",
                    "gpu_memory_utilization": 0.8,
                    "mfu": 0.5,
                    "overlap": True,
                },
            }
        ),
    )
    assert out2.read_bytes() == dumped(direct)


SMALL_TIERS = [("hbm", "2blocks"), ("dram", "128KiB"), ("ssd", "inf")]  # dram: 8 blocks of s4, 4 of s8


def _tier_argv(tiers: list[tuple[str, str]]) -> list[str]:
    return [arg for name, cap in tiers for arg in ("--tier", f"{name}={cap}")]


def _subset(rows: LaneRows, picked: list[int]) -> LaneRows:
    return LaneRows(
        [rows.keys[i] for i in picked],
        [rows.times[i] for i in picked],
        [rows.input_len[i] for i in picked],
        rows.block_size,
        rows.block_bytes,
    )


@pytest.mark.parametrize("trace", ["standard", "qwen"])
@pytest.mark.parametrize("mode", ["exclusive", "inclusive"])
def test_tiers_per_category_equal_the_naive_split(
    trace: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small: Small = request.getfixturevalue(trace)
    out = tmp_path / "t.json"
    argv = ["tiers", str(small.facts), *_tier_argv(SMALL_TIERS), "--mode", mode, "--config", str(small.config), *MODEL,
            "--bandwidth", "ssd=2GB/s", "-o", str(out)]  # fmt: skip
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    doc = json.loads(out.read_bytes())
    assert [lane["lane"] for lane in doc["lanes"]] == list(small.rows)
    assert not any("no request categories" in n for n in doc["notes"])
    inclusive = mode == "inclusive"
    names = [n for n, _ in SMALL_TIERS]
    for lane in doc["lanes"]:
        rows = small.rows[lane["lane"]]
        caps = [capacity_in_blocks(c, rows.block_size, rows.block_bytes) for _, c in SMALL_TIERS]
        served = simulate(rows.keys, rows.times, caps, inclusive=inclusive, ttl_ns=small.ttl_ns[lane["lane"]])
        want = naive_tier_sums(rows, served, caps)
        for key in ("requests", "input_tokens", "hit_rate"):
            assert lane[key] == want[key], (lane["lane"], key)
        for got_tier, want_tier, name in zip(lane["tiers"], want["tiers"], names, strict=True):  # type: ignore[call-overload]
            assert got_tier == {"name": name, **want_tier}
        assert lane["prefill_s"] == pytest.approx(naive_prefill(rows, served, doc["constants"], names), rel=1e-9)
        # per category: the oracle's split of the category's requests, and the lane is their sum
        cats = small.categories[lane["lane"]]
        assert set(lane["categories"]) == set(cats) and len(set(cats)) >= 3
        for name, entry in lane["categories"].items():
            picked = [i for i, c in enumerate(cats) if c == name]
            sub = _subset(rows, picked)
            sub_served = [served[i] for i in picked]
            want_cat = naive_tier_sums(sub, sub_served, caps)
            assert (entry["requests"], entry["input_tokens"], entry["hit_rate"]) == (
                want_cat["requests"], want_cat["input_tokens"], want_cat["hit_rate"],
            ), name  # fmt: skip
            for got_tier, want_tier, tier_name in zip(entry["tiers"], want_cat["tiers"], names, strict=True):  # type: ignore[call-overload]
                assert got_tier == {"name": tier_name, **want_tier}, name
            naive = naive_prefill(sub, sub_served, doc["constants"], names)
            for stat in ("mean", "p50", "p90", "p99", "uncached_mean", "saved_share"):
                assert entry["prefill_s"][stat] == pytest.approx(naive[stat], rel=1e-9), (name, stat)
        for key in ("requests", "input_tokens"):
            assert sum(e[key] for e in lane["categories"].values()) == lane[key]
        for i, tier in enumerate(lane["tiers"]):
            for key in ("hit_blocks", "hit_tokens", "bytes_loaded"):
                assert sum(e["tiers"][i][key] for e in lane["categories"].values()) == tier[key], (i, key)
        assert any(t["hit_blocks"] for t in lane["tiers"][1:])  # the lower tiers serve something
        for name in lane["categories"]:
            assert f"category {name}: " in stdout


def test_a_config_of_other_facts_gives_no_categories_and_says_why(
    standard: Small, qwen: Small, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    argv = ["tiers", str(standard.facts), *_tier_argv(SMALL_TIERS), "--config", str(qwen.config), "-o", str(out)]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    doc = json.loads(out.read_bytes())
    assert all(lane["categories"] == {} for lane in doc["lanes"])
    assert any(n.startswith("no request categories: lane s4") for n in doc["notes"]), doc["notes"]


# ---------------------------------------------------------------------------------------------
# litehit plan


PLAN_TIERS = ["--tier", "hbm=spare", "--tier", "dram=0..64GiB", "--tier", "ssd=0..inf",
              "--price", "hbm=0.05", "--price", "dram=0.004", "--price", "ssd=0.0002"]  # fmt: skip
PLAN_BODY = [
    {"name": "hbm", "capacity": "spare", "price_per_gib_hour": 0.05},
    {"name": "dram", "capacity": "0..64GiB", "price_per_gib_hour": 0.004},
    {"name": "ssd", "capacity": "0..inf", "price_per_gib_hour": 0.0002},
]


def _cost(configuration: dict[str, Any]) -> float:
    prices = {t["name"]: t["price_per_gib_hour"] for t in PLAN_BODY}
    return sum(t["capacity_bytes"] / (1 << 30) * prices[t["name"]] for t in configuration["tiers"])


def test_plan_for_a_hit_rate(conversation_facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plot = tmp_path / "plan.json", tmp_path / "plan.png"
    argv = ["plan", str(conversation_facts), "--tier", "hbm=2GiB", "--tier", "dram=0..64GiB", "--tier", "ssd=0..inf",
            "--price", "hbm=0.05", "--price", "dram=0.004", "--price", "ssd=0.0002", "--target-hit-rate", "0.3",
            "-o", str(out), "--plot", str(plot)]  # fmt: skip
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    assert stdout.endswith(f"plan: {out}\n") and "  best: hbm 2 GiB, " in stdout
    assert plot.read_bytes()[:8] == PNG
    doc = json.loads(out.read_bytes())
    assert {
        "mode",
        "target",
        "tiers",
        "gpu_price_per_hour",
        "constants",
        "lane",
        "best",
        "frontier",
        "searched",
    } == set(doc)
    assert doc["target"] == {"hit_rate": 0.3} and doc["gpu_price_per_hour"] is None
    body = [{**PLAN_BODY[0], "capacity": "2GiB"}, *PLAN_BODY[1:]]
    direct = plan_document(
        load_lanes(conversation_facts), PlanOptions.model_validate({"tiers": body, "target": {"hit_rate": 0.3}})
    )
    assert out.read_bytes() == dumped(direct)
    best = doc["best"]
    assert best["hit_rate"] >= 0.3 and best["prefill_s"] is None
    assert best["tiers"][0]["capacity_blocks"] == 2048  # fixed
    assert best["cost_per_hour"] == pytest.approx(_cost(best), rel=1e-12)
    # the best configuration split at its capacities (the tiers command) hits what the plan says
    caps = [f"{t['capacity_blocks']}blocks" for t in best["tiers"]]
    split = tiers_document(
        load_lanes(conversation_facts), tiers_options(list(zip(["hbm", "dram", "ssd"], caps, strict=True)))
    )
    assert split["lanes"][0]["hit_rate"] == best["hit_rate"]
    # the cheapest fill: ssd (the cheapest per GiB) first, dram untouched
    assert best["tiers"][1]["capacity_blocks"] == 0 and best["tiers"][2]["capacity_blocks"] > 0
    frontier = doc["frontier"]
    assert len(frontier) > 10
    assert all(a["cost_per_hour"] < b["cost_per_hour"] and a["hit_rate"] < b["hit_rate"]
               for a, b in itertools.pairwise(frontier))  # fmt: skip
    # an unreachable target: no best, a reason, exit 0
    code, stdout, err = run([*argv[:-5], "1", "-o", str(tmp_path / "none.json")], capsys)
    assert code == 0, err
    none = json.loads((tmp_path / "none.json").read_bytes())
    assert none["best"] is None and "no configuration within the bounds meets the target" in none["unreachable"]
    assert "best: none (" in stdout


def test_plan_for_a_time_target_and_a_gpu_price(
    conversation_facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ttft.json"
    argv = ["plan", str(conversation_facts), *PLAN_TIERS, *MODEL]
    code, _, err = run(
        [*argv, "--target-ttft", "1.06", "--ttft-stat", "p90", "-o", str(out), "--plot", str(tmp_path / "p.svg")],
        capsys,
    )
    assert code == 0, err
    doc = json.loads(out.read_bytes())
    assert doc["target"] == {"ttft_s": 1.06, "ttft_stat": "p90"}
    assert set(doc["constants"]) >= CONSTANT_KEYS and doc["constants"]["spare"]["hbm"]["spare_bytes"] == SPARE_BYTES
    prefill = {"model": "Llama-3.1-8B", "gpu": "H100-SXM"}
    direct = plan_document(
        load_lanes(conversation_facts),
        PlanOptions.model_validate(
            {"tiers": PLAN_BODY, "prefill": prefill, "target": {"ttft_s": 1.06}, "ttft_stat": "p90"}
        ),
    )
    assert out.read_bytes() == dumped(direct)
    best = doc["best"]
    assert best is not None and best["prefill_s"]["p90"] <= 1.06
    assert best["tiers"][0]["capacity_bytes"] == SPARE_BYTES // (1 << 20) * (1 << 20)
    # with spare HBM alone (the cheapest) the p90 is 1.07 s: the target needs lower tiers
    assert doc["frontier"][0]["prefill_s"]["p90"] > 1.06 and sum(t["capacity_blocks"] for t in best["tiers"][1:]) > 0
    meeting = [c for c in doc["frontier"] if c["prefill_s"]["p90"] <= 1.06]
    assert all(best["cost_per_hour"] <= c["cost_per_hour"] for c in meeting)
    assert best["cost_per_hour"] == pytest.approx(_cost(best), rel=1e-12)
    # a GPU price values every configuration: the best has the highest net value
    out2 = tmp_path / "value.json"
    code, stdout, err = run([*argv, "--gpu-price", "2.5", "-o", str(out2)], capsys)
    assert code == 0, err
    valued = json.loads(out2.read_bytes())
    assert valued["gpu_price_per_hour"] == 2.5 and "net value" in stdout
    for c in [valued["best"], *valued["frontier"]]:
        p = c["prefill_s"]
        hours = (p["uncached_gpu_s_per_hour"] - p["gpu_s_per_hour"]) / 3600
        assert c["gpu_hours_saved_per_hour"] == pytest.approx(hours, rel=1e-12)
        assert c["net_per_hour"] == pytest.approx(hours * 2.5 - c["cost_per_hour"], rel=1e-9)
    assert valued["best"]["net_per_hour"] >= max(c["net_per_hour"] for c in valued["frontier"])
    # a saving target
    code, _, err = run([*argv, "--target-prefill-saving", "0.35", "-o", str(tmp_path / "s.json")], capsys)
    assert code == 0, err
    saving = json.loads((tmp_path / "s.json").read_bytes())
    assert saving["best"]["prefill_s"]["saved_share"] >= 0.35 > saving["frontier"][0]["prefill_s"]["saved_share"]


def test_a_multi_lane_plan_has_lanes(standard: Small, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    argv = ["plan", str(standard.facts), "--tier", "hbm=2blocks", "--tier", "dram=0..10blocks", "--price", "hbm=1",
            "--price", "dram=0.5", "--target-hit-rate", "0.2", "-o", str(out)]  # fmt: skip
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    doc = json.loads(out.read_bytes())
    assert "best" not in doc and [p["lane"] for p in doc["lanes"]] == ["s4", "s8"]
    assert "lane s4:" in stdout and "lane s8:" in stdout
    for plan in doc["lanes"]:
        rows = standard.rows[plan["lane"]]
        need = -(-sum(rows.input_len) * 2 // 10)
        # the oracle: the cheapest dram (hbm fixed at 2) whose hits reach the target
        hits = [
            sum(map(sum, simulate(rows.keys, rows.times, (2, d), ttl_ns=standard.ttl_ns[plan["lane"]])))
            * rows.block_size
            for d in range(11)
        ]
        reaching = [d for d in range(11) if hits[d] >= need]
        if reaching:
            assert plan["best"]["tiers"][1]["capacity_blocks"] == reaching[0], plan["lane"]
            assert plan["best"]["hit_rate"] == hits[reaching[0]] / sum(rows.input_len)
        else:
            assert plan["best"] is None and "unreachable" in plan


# ---------------------------------------------------------------------------------------------
# bad input: exit 1, one line naming the flag, no traceback, nothing written


def _options_of(command: str) -> set[str]:
    """The flags of a command, as its parser declares them."""
    sub = argparse.ArgumentParser().add_subparsers()
    tiers_cli.add_parsers(sub)
    return set(sub.choices[command]._option_string_actions)


T2 = ["--tier", "hbm=1GiB", "--tier", "ssd=inf"]
BAD = [
    pytest.param("tiers", ["--tier", "hbm=-1GiB", "--tier", "ssd=inf"], "--tier hbm", "negative", id="negative"),
    pytest.param("tiers", ["--tier", "hbm=nan", "--tier", "ssd=inf"], "--tier hbm", "nan", id="nan"),
    pytest.param("plan", ["--tier", "hbm=1GiB", "--tier", "ssd=0..NaN"], "--tier ssd", "NaN", id="nan-range"),
    pytest.param("tiers", ["--tier", "hbm=3furlongs", "--tier", "ssd=inf"], "--tier hbm", "furlongs", id="unit"),
    pytest.param("tiers", ["--tier", "hbm", "--tier", "ssd=inf"], "--tier", "NAME=VALUE", id="no-equals"),
    pytest.param("tiers", ["--tier", "hbm=1GiB", "--tier", "hbm=inf"], "--tier", "given twice", id="duplicate"),
    pytest.param("tiers", ["--tier", "hbm=inf", "--tier", "ssd=1GiB"], "--tier hbm", "only the last", id="inf-not-last"),
    pytest.param("plan", ["--tier", "hbm=inf..inf", "--tier", "ssd=0..inf"], "--tier hbm", "inf", id="range-from-inf"),
    pytest.param("tiers", ["--tier", "hbm=4GiB", "--tier", "dram=1GiB", "--mode", "inclusive"], "--tier dram",
                 "non-decreasing", id="inclusive-decreasing"),
    pytest.param("plan", [*T2[:2], "--tier", "ssd=0..inf", "--target-ttft", "0.5"], "--target-ttft", "prefill model",
                 id="ttft-without-model"),
    pytest.param("plan", [*T2[:2], "--tier", "ssd=0..inf", "--target-prefill-saving", "0.5"],
                 "--target-prefill-saving", "prefill model", id="saving-without-model"),
    pytest.param("plan", [*T2[:2], "--tier", "ssd=0..inf", "--gpu-price", "2"], "--gpu-price", "prefill model",
                 id="gpu-price-without-model"),
    pytest.param("tiers", [*T2, "--model", "Llama-3.1-8B", "--gpu", "Z100"], "--gpu", "unknown GPU", id="gpu"),
    pytest.param("tiers", [*T2, "--model", "Llama-9000", "--gpu", "H100-SXM"], "--model", "unknown model", id="model"),
    pytest.param("tiers", [*T2, *MODEL, "--link", "ssd=carrier-pigeon"], "--link ssd", "unknown link", id="link"),
    pytest.param("tiers", [*T2, *MODEL, "--link", "nvme=pcie-gen5"], "--link nvme", "no tier named", id="link-tier"),
    pytest.param("tiers", [*T2, *MODEL, "--bandwidth", "ssd=12parsecs"], "--bandwidth ssd", "rate", id="bandwidth"),
    pytest.param("tiers", [*T2, *MODEL, "--latency", "ssd=soon"], "--latency ssd", "time", id="latency"),
    pytest.param("tiers", [*T2, "--model", "Llama-3.1-8B"], "--gpu", "both", id="model-without-gpu"),
    pytest.param("tiers", ["--tier", "hbm=spare", "--tier", "ssd=inf"], "--tier hbm", "spare", id="spare-without-model"),
    pytest.param("tiers", [*T2, "--plot", "PLOT/out.txt"], "--plot", ".png or .svg", id="plot-suffix"),
    pytest.param("plan", ["--tier", "hbm=1GiB", "--tier", "ssd=4GiB..1GiB"], "--tier ssd", "below its start",
                 id="range-max-below-min"),
    pytest.param("plan", ["--tier", "hbm=1GiB", "--tier", "ssd=0..inf", "--price", "ssd=cheap"], "--price ssd",
                 "not a number", id="price"),
    pytest.param("plan", ["--tier", "hbm=1GiB", "--tier", "ssd=0..inf", "--price", "ssd=-1"], "--price ssd",
                 "greater than or equal to 0", id="negative-price"),
    pytest.param("plan", ["--tier", "hbm=1GiB", "--tier", "ssd=0..inf", "--target-hit-rate", "1.5"],
                 "--target-hit-rate", "less than or equal to 1", id="hit-rate"),
    pytest.param("tiers", [*T2, *MODEL, "--mfu", "2"], "--mfu", "less than or equal to 1", id="mfu"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "args", "flag", "words"), BAD)
def test_bad_input_is_one_line_naming_the_flag(
    command: str,
    args: list[str],
    flag: str,
    words: str,
    conversation_facts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.json"
    args = [a.replace("PLOT", str(tmp_path)) for a in args]
    code, stdout, err = run([command, str(conversation_facts), *args, "-o", str(out)], capsys)
    assert code == 1, (stdout, err)
    assert "Traceback" not in err and "Traceback" not in stdout
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"litehit: error: {flag}: ") and words in line, line
    named = line.removeprefix("litehit: error: ").split(":")[0].split()[0]
    assert named in _options_of(command), f"{line}: names {named!r}, not a flag of litehit {command}"
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written (no plot either)


# ---------------------------------------------------------------------------------------------
# the runs are recorded


def test_runs_are_recorded_as_tiers_and_plan_jobs(
    home: Path, conversation_facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t_out, p_out = tmp_path / "t.json", tmp_path / "p.json"
    assert (
        run(["tiers", str(conversation_facts), "--tier", "hbm=1GiB", "--tier", "ssd=inf", "-o", str(t_out)], capsys)[0]
        == 0
    )
    plan_args = ["plan", str(conversation_facts), "--tier", "hbm=1GiB", "--tier", "ssd=0..4GiB", "--price", "ssd=0.01"]
    assert run([*plan_args, "--target-hit-rate", "0.1", "-o", str(p_out)], capsys)[0] == 0
    assert run(["plan", str(conversation_facts), "--tier", "hbm=1GiB", "--tier", "ssd=9GiB..1GiB"], capsys)[0] == 1
    listed = {}
    for kind in ("tiers", "plan"):
        code, stdout, _ = run(["jobs", "--kind", kind], capsys)
        assert code == 0
        listed[kind] = [line.split() for line in stdout.splitlines()[1:]]
    assert [row[1:4] for row in listed["tiers"]] == [["tiers", "cli", "succeeded"]]
    assert listed["tiers"][0][-1] == str(t_out.resolve())
    assert [row[1:4] for row in listed["plan"]] == [["plan", "cli", "failed"], ["plan", "cli", "succeeded"]]
    assert listed["plan"][1][-1] == str(p_out.resolve())
    assert "below its start" in " ".join(listed["plan"][0])
    # the tiers record: its spec and one summary row per tier, the document's numbers
    code, stdout, _ = run(["jobs", "--show", listed["tiers"][0][0]], capsys)
    assert code == 0
    shown = json.loads(stdout)
    assert shown["spec"]["facts_path"] == str(conversation_facts.resolve())
    assert [t["capacity"] for t in shown["spec"]["tiers"]] == ["1GiB", "inf"]
    doc = json.loads(t_out.read_bytes())
    got = [
        (s["lane"], s["category"], s["tier"], s["name"], s["hit_blocks"], s["bytes_loaded"]) for s in shown["summaries"]
    ]
    want = [
        ("b512", "", i, t["name"], t["hit_blocks"], t["bytes_loaded"]) for i, t in enumerate(doc["lanes"][0]["tiers"])
    ]
    assert got == want
    # the plan record: the best (rank 0) then the frontier
    code, stdout, _ = run(["jobs", "--show", listed["plan"][1][0]], capsys)
    shown = json.loads(stdout)
    plan = json.loads(p_out.read_bytes())
    ranked = [plan["best"], *plan["frontier"]]
    assert [(s["rank"], s["hit_rate"], s["cost_per_hour"]) for s in shown["summaries"]] == [
        (i, c["hit_rate"], c["cost_per_hour"]) for i, c in enumerate(ranked)
    ]
