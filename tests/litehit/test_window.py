"""``litehit window``: every metric of window.json against a naive computation on the naive policy
simulator (tests/window_oracle.py), on hand-made traces with known answers and on generated
traces with categories at several capacities and policies; the estimate; bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from test_cli_policies import qwen_trace
from window_oracle import naive_lane, naive_lane_window, naive_report

from litehit.cli import main

BLOCK_BYTES = 16 * 1024  # per 16-token trace block
NS = 10**9
# the keys issue 12 promises users
ISSUE_LANE_KEYS = {"lane", "capacity_blocks", "policy", "evictions", "outcomes", "delay_s", "coverage_target"}
ISSUE_LANE_KEYS |= {"window_s", "buckets", "peak_evictions_per_s", "memory_bytes", "memory_bytes_15min", "categories"}


def gib(blocks: int) -> str:
    return repr(blocks * BLOCK_BYTES / 2**30)  # exact in binary: capacity_blocks gives `blocks` back


def run_window(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["window", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def write_qwen(path: Path, rows: list[tuple[float, str, list[int]]]) -> None:
    """(seconds, type, hash_ids) rows of turn 1: category '<type>-1'."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "chat_id": i,
                    "timestamp": ts,
                    "input_length": 16 * len(keys) + 3,
                    "hash_ids": keys,
                    "type": kind,
                    "turn": 1,
                }
            )
            + "\n"
            for i, (ts, kind, keys) in enumerate(rows)
        )
    )


def sized(tmp_path: Path, trace: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = tmp_path / "window.json"
    code, _, err = run_window(
        [str(trace), "--block-bytes", str(BLOCK_BYTES), "--no-prefix-hash", *extra, "-o", str(out)], capsys
    )
    assert code == 0, err
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_hand_made_lru_trace_with_known_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Capacity 2 blocks, LRU; a request commits its keys from last to first.
    #   0 s [1,2] text : miss on 1, never evicted -> no_match.        resident {2, 1} (1 most recent)
    #  10 s [3] image  : no_match; evicts 2 (least recent) @10.         resident {1, 3}
    #  25 s [1,2] text : hits 1; first uncached 2, evicted @10 -> evicted, delay 15 s. Committing 2
    #                    evicts 1 @25, committing 1 evicts 3 @25 (two evictions in second 25).
    #  26 s [3] image  : 3 evicted @25 -> delay 1 s; evicts 2 @26.      resident {1, 3}
    # 100 s [2] text   : 2 evicted @10 and again @26: the latest counts -> delay 74 s; evicts 1 @100.
    trace = tmp_path / "hand.jsonl"
    write_qwen(
        trace, [(0, "text", [1, 2]), (10, "image", [3]), (25, "text", [1, 2]), (26, "image", [3]), (100, "text", [2])]
    )
    plot = tmp_path / "w.svg"
    result = sized(tmp_path, trace, ["--capacity-gb", gib(2), "--coverage", "0.5", "--plot", str(plot)], capsys)
    (lane,) = result["lanes"]
    assert set(lane) >= ISSUE_LANE_KEYS and set(lane["categories"]["text-1"]) >= {"outcomes", "delay_s"}
    assert (lane["capacity_blocks"], lane["policy"], lane["requests"], lane["evictions"]) == (2, "lru", 5, 5)
    assert lane["outcomes"] == {"evicted": 3, "no_match": 2}
    # delays 1, 15, 74 s: p50 = rank ceil(1.5) = 2 -> 15; p90.. = rank 3 -> 74
    assert lane["delay_s"] == {"count": 3, "p50": 15.0, "p90": 74.0, "p99": 74.0, "p999": 74.0, "max": 74.0}
    assert [p["window_s"] for p in lane["coverage"]] == [0.1, 0.5, 1, 2, 5, 10, 15, 30, 60, 120]
    assert [p["coverage"] for p in lane["coverage"]] == [0, 0, *[1 / 3] * 4, *[2 / 3] * 3, 1.0]
    # W for 50%: rank ceil(0.5 x 3) = 2 -> 15 s; ring of ceil(15 / 10) = 2 buckets
    assert (lane["window_s"], lane["buckets"], lane["extra_retention_s"]) == (15.0, 2, 10.0)
    assert (lane["peak_evictions_per_s"], lane["peak_second"]) == (2, 25)
    assert lane["memory_bytes"] == 2 * 15 * 24 / 0.8 == 900  # E x W x S / L
    assert lane["memory_bytes_15min"] == 2 * 900 * 24 / 0.8
    text, image = lane["categories"]["text-1"], lane["categories"]["image-1"]
    assert (text["requests"], text["outcomes"], text["window_s"]) == (3, {"evicted": 2, "no_match": 1}, 15.0)
    assert (image["requests"], image["outcomes"], image["window_s"]) == (2, {"evicted": 1, "no_match": 1}, 1.0)
    assert image["delay_s"]["max"] == 1.0 and text["delay_s"]["p90"] == 74.0
    assert result["overall"]["outcomes"] == lane["outcomes"] and result["overall"]["window_s"] == 15.0
    assert b"<svg" in plot.read_bytes()
    # and the naive computation says the same
    requests = [(0, 0, [1, 2]), (10 * NS, 1, [3]), (25 * NS, 0, [1, 2]), (26 * NS, 1, [3]), (100 * NS, 0, [2])]
    want = naive_lane_window(naive_lane("lru", 2, requests), {0: "text-1", 1: "image-1"}, "0.5", 24, 0.8, 10)
    assert {k: lane[k] for k in want} == want


def test_sub_second_delays_and_aligned_seconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Mooncake rows (ms timestamps), FIFO at capacity 1: every new key evicts the resident one.
    #  9.900 [5] no_match                9.950 [6] no_match, evicts 5 @9.950 (second 9)
    # 10.000 [5] evicted, 50 ms; evicts 6 @10.000     10.500 [6] evicted, 500 ms; evicts 5 @10.500
    # 10.999 [5] evicted, 499 ms; evicts 6 @10.999    11.000 [5] resident: a full hit, no outcome
    # 11.000 [7] no_match; evicts 5 @11.000 (second 11). Second 10 holds 3 evictions: E = 3.
    trace = tmp_path / "mooncake.jsonl"
    rows = [(9900, 5), (9950, 6), (10000, 5), (10500, 6), (10999, 5), (11000, 5), (11000, 7)]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 16, "hash_ids": [k]}) + "\n" for t, k in rows))
    result = sized(
        tmp_path,
        trace,
        ["--block-size", "16", "--capacity-gb", gib(1), "--policy", "fifo", "--bucket-seconds", "0.2"],
        capsys,
    )
    (lane,) = result["lanes"]
    assert (lane["requests"], lane["evictions"], lane["outcomes"]) == (7, 5, {"evicted": 3, "no_match": 3})
    assert lane["delay_s"] == {"count": 3, "p50": 0.499, "p90": 0.5, "p99": 0.5, "p999": 0.5, "max": 0.5}
    assert [(p["window_s"], p["coverage"]) for p in lane["coverage"]] == [(0.1, 1 / 3), (0.5, 1.0)]
    # W for 99%: rank ceil(2.97) = 3 -> 0.5 s; ceil(0.5 / 0.2) = 3 buckets
    assert (lane["window_s"], lane["buckets"], lane["peak_evictions_per_s"], lane["peak_second"]) == (0.5, 3, 3, 10)
    assert lane["memory_bytes"] == pytest.approx(3 * 0.5 * 24 / 0.8)
    assert list(lane["categories"]) == ["all"]
    requests = [(t * 10**6, 0, [k]) for t, k in rows]
    want = naive_lane_window(naive_lane("fifo", 1, requests), {0: "all"}, "0.99", 24, 0.8, 0.2)
    assert {k: lane[k] for k in want} == want


def test_capacity_below_one_block_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "hand.jsonl"
    write_qwen(trace, [(0, "text", [1, 2]), (1, "text", [1, 2])])
    plot = tmp_path / "w.png"
    result = sized(tmp_path, trace, ["--capacity-gb", "1e-9", "--plot", str(plot)], capsys)
    (lane,) = result["lanes"]
    assert (lane["capacity_blocks"], lane["evictions"], lane["outcomes"]) == (0, 0, {"evicted": 0, "no_match": 2})
    assert lane["delay_s"] == {"count": 0, "p50": None, "p90": None, "p99": None, "p999": None, "max": None}
    assert (lane["coverage"], lane["window_s"], lane["buckets"], lane["memory_bytes"]) == ([], 0.0, 0, 0.0)
    assert plot.read_bytes()[:4] == b"\x89PNG"


def naive_requests(rows: list[dict[str, Any]]) -> tuple[list[tuple[int, int, list[int]]], dict[int, str]]:
    """qwen rows as the naive simulator's requests; categories '<type>-<turn bucket>' numbered
    in order of first appearance; timestamps truncated to ns as the reader does."""
    ids: dict[str, int] = {}
    requests = []
    for row in rows:
        name = f"{row['type']}-{min(row['turn'], 3)}".replace("-3", "-3+")
        requests.append((int(float(row["timestamp"]) * 1e9), ids.setdefault(name, len(ids)), list(row["hash_ids"])))
    return requests, {i: name for name, i in ids.items()}


@pytest.mark.parametrize("seed", [3, 4])
def test_generated_traces_match_the_naive_sizing(tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    requests, names = naive_requests(qwen_trace(trace, seed))
    assert len(names) >= 4
    for policy, capacity in [("lru", 3), ("lru", 12), ("lru", 40), ("fifo", 12), ("lfu", 40), ("wa", 12)]:
        result = sized(
            tmp_path, trace, ["--capacity-gb", gib(capacity), "--policy", policy, "--coverage", "0.9"], capsys
        )
        (lane,) = result["lanes"]
        naive = naive_lane(policy, capacity, requests)
        want = naive_lane_window(naive, names, "0.9", 24, 0.8, 10)
        for key in ("memory_bytes", "memory_mib", "memory_bytes_15min", "memory_mib_15min"):
            assert lane[key] == pytest.approx(want.pop(key), rel=1e-12), (policy, capacity, key)
        assert {k: lane[k] for k in want} == want, (policy, capacity)
        assert lane["outcomes"]["evicted"] > 10 and lane["peak_evictions_per_s"] >= 2, (policy, capacity)
        assert result["overall"] == naive_report(naive.all, "0.9")


def test_overall_pools_the_lanes_of_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # two lanes of the same trace, one with blocks twice as large: at one capacity it holds half
    trace = tmp_path / "qwen.jsonl"
    requests, names = naive_requests(qwen_trace(trace, 5))
    config = {
        "trace_file_path": str(trace),
        "output_result_path": str(tmp_path),
        "block_size": 16,
        "fanout_all_instances": True,
        "instance_groups": [{"name": "g1", "enable_prefix_hash": False}],
        "instances": [instance("small", 16, sizes=(BLOCK_BYTES,)), instance("large", 16, sizes=(2 * BLOCK_BYTES,))],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "w.json"
    code, printed, err = run_window(
        [str(path), "--capacity-gb", gib(20), "--entry-bytes", "32", "-o", str(out)], capsys
    )
    assert code == 0, err
    result = json.loads(out.read_text())
    pooled = naive_lane("lru", 20, requests).all
    for lane, capacity in zip(result["lanes"], [20, 10], strict=True):
        naive = naive_lane("lru", capacity, requests)
        want = naive_lane_window(naive, names, "0.99", 32, 0.8, 10)
        assert {k: lane[k] for k in ("outcomes", "delay_s", "window_s", "peak_evictions_per_s", "categories")} == {
            k: want[k] for k in ("outcomes", "delay_s", "window_s", "peak_evictions_per_s", "categories")
        }
        if capacity == 10:
            pooled.requests += naive.all.requests
            pooled.evicted += naive.all.evicted
            pooled.no_match += naive.all.no_match
            pooled.delays_ns += naive.all.delays_ns
    assert result["overall"] == naive_report(pooled, "0.99")
    assert "lane small" in printed and "lane large" in printed and "all lanes:" in printed


def test_the_seed_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    # seed 003: 50,000 evictions/s, a 120 s window, 24 B entries, load factor 0.8
    code, out, err = run_window(
        [
            "--estimate",
            "--evictions-per-s",
            "50000",
            "--window-s",
            "120",
            "--entry-bytes",
            "24",
            "--load-factor",
            "0.8",
        ],
        capsys,
    )
    assert code == 0, err
    assert "180,000,000 B = 171.7 MiB" in out
    assert "15 minutes: 1,350,000,000 B = 1.26 GiB" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "mru"], "--policy: "),
        (["--capacity-gb", "0"], "--capacity-gb: "),
        (["--capacity-gb", "-2"], "--capacity-gb: "),
        (["--capacity-gb", "nan"], "--capacity-gb: "),
        (["--coverage", "0"], "--coverage: must be in (0, 1] (got '0')"),
        (["--coverage", "1.5"], "--coverage: must be in (0, 1] (got '1.5')"),
        (["--entry-bytes", "0"], "--entry-bytes: "),
        (["--entry-bytes", "-24"], "--entry-bytes: "),
        (["--load-factor", "0"], "--load-factor: "),
        (["--load-factor", "1.25"], "--load-factor: "),
        (["--bucket-seconds", "0"], "--bucket-seconds: "),
        (["--ttl-seconds", "60"], "has a TTL of 60 s"),
        (["--plot", "x.pdf"], "--plot"),
        (["--window-s", "120"], "--window-s: only with --estimate"),
    ],
)
def test_bad_input_exits_1_naming_the_flag(
    data_dir: Path, tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(data_dir / "conversation_trace.jsonl"), *extra, "-o", str(tmp_path / "w.json")]
    if "--capacity-gb" not in extra:
        args += ["--capacity-gb", "1"]
    code, out, err = run_window(args, capsys)
    assert code == 1
    assert message in err
    assert err.startswith("litehit: error:") and err.count("\n") == 1
    assert out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--estimate", "--evictions-per-s", "-1", "--window-s", "120"], "--evictions-per-s: "),
        (["--estimate", "--evictions-per-s", "1", "--window-s", "inf"], "--window-s: "),
        (["--estimate", "--evictions-per-s", "1", "--window-s", "1", "--load-factor", "0"], "--load-factor: "),
        (["--estimate", "--evictions-per-s", "1", "--window-s", "1", "--entry-bytes", "0"], "--entry-bytes: "),
        (["--estimate", "--evictions-per-s", "1"], "--window-s: required with --estimate"),
        (["--estimate", "--evictions-per-s", "1", "--window-s", "1", "--capacity-gb", "1"], "--capacity-gb"),
        (["trace.jsonl", "--estimate", "--evictions-per-s", "1", "--window-s", "1"], "--estimate takes no trace"),
        (["--capacity-gb", "1"], "TRACE: a trace or config file is required"),
    ],
)
def test_bad_estimates_exit_1(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_window(args, capsys)
    assert (code, out) == (1, "")
    assert message in err and err.count("\n") == 1


def test_trace_without_capacity_exits_1(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_window([str(data_dir / "conversation_trace.jsonl")], capsys)
    assert code == 1 and "--capacity-gb: required with a trace" in err
