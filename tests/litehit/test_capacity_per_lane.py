"""Policy sweeps and window sizings at capacities per lane: ``Nblocks`` is exactly N blocks in
every lane, ``Ntokens`` floor(N / the lane's block size) blocks (as a query reads it). Results
equal the naive simulators (tests/policy_oracle.py, tests/window_oracle.py) at exactly those
blocks, the LRU column equals the facts query at the same capacity, outputs show blocks and bytes,
and capacities in GiB keep their outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from policy_oracle import simulate
from test_cli_policies import qwen_trace
from test_window import naive_requests
from window_oracle import naive_lane, naive_lane_window

from litehit.capacity import format_bytes, parse_capacities
from litehit.cli import main
from litehit.errors import ConfigError
from litehit.policies.options import parse_sweep_options
from litehit.query import query_facts
from litehit.window.options import parse_window_options

TRACE_BLOCK_BYTES = 16 * 1024  # per 16-token trace block
LANES = {"b16": (16, TRACE_BLOCK_BYTES), "b32": (32, 2 * TRACE_BLOCK_BYTES)}  # block size, block bytes
FLAGS = ["--block-sizes", "16,32", "--block-bytes", str(TRACE_BLOCK_BYTES), "--no-prefix-hash"]


def lane_requests(rows: list[dict[str, Any]], block_size: int) -> list[tuple[int, int, list[int]]]:
    """The naive requests of a lane: every (block_size / 16)-th key of the row, as re-blocking keeps."""
    requests, _ = naive_requests(rows)
    k = block_size // 16
    return [(ts, cat, keys[k - 1 :: k]) for ts, cat, keys in requests]


def test_options_keep_blocks_and_tokens_per_lane() -> None:
    options = parse_sweep_options({"capacity_gb": ["0.5", 2, "512MiB", "20000blocks", "1Mtokens", "4Kblocks"]})
    assert options.capacity_gb == [0.5, 2.0, 0.5, "20000blocks", "1000000tokens", "4000blocks"]
    assert parse_sweep_options(options.model_dump(mode="json")) == options  # as a job stores and reads it
    assert parse_window_options({"capacity_gb": "20000blocks"}).capacity_gb == "20000blocks"
    for bad, why in [
        ("0blocks", "a capacity in blocks must be > 0"),
        ("0tokens", "a capacity in tokens must be > 0"),
        ("1.5blocks", "a whole number of blocks"),
        ("2GB", "write GiB"),
    ]:
        with pytest.raises(ConfigError, match=why) as err:
            parse_sweep_options({"capacity_gb": [1, bad]})
        assert err.value.issues[0].path == "capacity_gb[1]"


@pytest.mark.parametrize("seed", [1, 2])
def test_every_policy_at_blocks_and_tokens_equals_the_naive_simulator(
    tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    rows = qwen_trace(trace, seed)
    caps = ["12blocks", "40blocks", "640tokens", "100tokens", repr(3 * TRACE_BLOCK_BYTES / 2**30)]
    out_json = tmp_path / "p.json"
    args = ["policies", str(trace), *FLAGS, "--capacity-gb", *caps, "-o", str(out_json)]
    assert main([*args, "--wa-refit-seconds", "120", "--wa-fit-window-seconds", "900"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out_json.read_text())
    assert [lane["lane"] for lane in result["lanes"]] == list(LANES)
    for lane in result["lanes"]:
        block_size, block_bytes = LANES[lane["lane"]]
        assert (lane["block_size"], lane["block_bytes"]) == (block_size, block_bytes)
        requests = lane_requests(rows, block_size)
        blocks = {"12blocks": 12, "40blocks": 40, "640tokens": 640 // block_size, "100tokens": 100 // block_size}
        for r in lane["results"]:
            cap = r.get("capacity")
            n = blocks[cap] if cap is not None else 3 * TRACE_BLOCK_BYTES // block_bytes
            want = simulate(r["policy"], n, requests, wa_fit_window_s=900.0, wa_refit_s=120.0)
            assert (r["capacity_blocks"], r["hit_blocks"], r["evictions"]) == (n, sum(want.hits), len(want.evictions))
            assert r["hit_tokens"] == block_size * sum(want.hits)
            # a capacity per lane: the bytes of its blocks on this lane; GiB as asked
            assert r["capacity_gb"] == (n * block_bytes / 2**30 if cap is not None else float(caps[-1]))
            assert ("capacity" in r) == (cap is not None)  # a capacity in GiB keeps the original keys
        assert [r["capacity"] for r in lane["results"] if r["policy"] == "lru" and "capacity" in r] == [
            "12blocks",
            "40blocks",
            "640tokens",
            "100tokens",
        ]
    assert "12 blocks (192 KiB)" in printed and "640 tokens = 40 blocks (640 KiB)" in printed
    assert "640 tokens = 20 blocks (640 KiB)" in printed and "0.046875 GiB" not in printed


def test_the_lru_column_at_blocks_and_tokens_equals_the_query(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(data_dir / "conversation_trace.jsonl")
    caps = ["3000blocks", "2Mtokens", "700blocks"]
    assert main(["replay", trace, "--block-sizes", "512,1024", "-o", str(tmp_path / "facts")]) == 0
    query = query_facts(tmp_path / "facts" / "litehit_facts.csv", parse_capacities(caps))
    out_json = tmp_path / "p.json"
    args = ["policies", trace, "--block-sizes", "512,1024", "--capacity", *caps, "--policies", "lru"]
    assert main([*args, "--verify-lru", "-o", str(out_json)]) == 0
    capsys.readouterr()
    summaries = {s.instance_id: s for s in query.instances}
    for lane in json.loads(out_json.read_text())["lanes"]:
        summary = summaries[lane["lane"].encode()]
        assert [r["hit_blocks"] for r in lane["results"]] == summary.total_hit_blocks
        assert [r["hit_tokens"] for r in lane["results"]] == summary.total_hit_tokens
        size = lane["block_size"]
        assert [r["capacity_blocks"] for r in lane["results"]] == [3000, 2_000_000 // size, 700]
        assert lane["lru_check"]["equal"] == lane["lru_check"]["comparisons"] > 0


@pytest.mark.parametrize(("capacity", "policy"), [("12blocks", "lru"), ("200tokens", "fifo"), ("40blocks", "wa")])
def test_a_window_sizing_at_blocks_or_tokens_equals_the_naive_sizing(
    tmp_path: Path, capacity: str, policy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    rows = qwen_trace(trace, 3)
    _, names = naive_requests(rows)
    out = tmp_path / "w.json"
    args = ["window", str(trace), *FLAGS, "--capacity", capacity, "--policy", policy, "--coverage", "0.9"]
    assert main([*args, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["settings"]["capacity_gb"] == capacity
    for lane in result["lanes"]:
        block_size, block_bytes = LANES[lane["lane"]]
        (slot,) = parse_capacities([capacity])
        blocks = slot.count if slot.unit == "blocks" else slot.count // block_size
        assert (lane["capacity"], lane["capacity_blocks"]) == (capacity, blocks)
        assert lane["capacity_gb"] == blocks * block_bytes / 2**30
        naive = naive_lane(policy, blocks, lane_requests(rows, block_size))
        want = naive_lane_window(naive, names, "0.9", 24, 0.8, 10)
        for key in ("memory_bytes", "memory_mib", "memory_bytes_15min", "memory_mib_15min"):
            assert lane[key] == pytest.approx(want.pop(key), rel=1e-12)
        assert {k: lane[k] for k in want} == want
        label = f"{slot.label} ({format_bytes(blocks * block_bytes)}) = {blocks:,} blocks"
        assert f"lane {lane['lane']} (block {block_size} tokens, {block_bytes:,} B per block): {policy} at {label}" in (
            printed
        )


def test_a_window_in_gib_keeps_its_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, 4)
    out = tmp_path / "w.json"
    assert main(["window", str(trace), *FLAGS, "--capacity-gb", "0.001", "-o", str(out)]) == 0
    capsys.readouterr()
    result = json.loads(out.read_text())
    assert result["settings"]["capacity_gb"] == 0.001
    assert all("capacity" not in lane and lane["capacity_gb"] == 0.001 for lane in result["lanes"])


def test_a_bad_capacity_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    qwen_trace(trace, 1)
    assert main(["policies", str(trace), "--capacity-gb", "1", "0blocks"]) == 1
    assert "--capacity-gb[1]: a capacity in blocks must be > 0 (got '0blocks')" in capsys.readouterr().err
    assert main(["window", str(trace), "--capacity", "2.5tokens"]) == 1
    assert "--capacity-gb: invalid capacity 2.5tokens: a whole number of tokens" in capsys.readouterr().err
