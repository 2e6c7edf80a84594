"""The committed golden curves (examples/data/*.curves, computed by the original LiteHit tool)
recomputed by the naive oracles in oracle.py, with nothing from core_c or litehit.

A .curves file has one line per request of conversation_trace.jsonl, in input order: the
request's hit curve as compact JSON ``[[start,run],...]``. Block k of the request's prefix
has threshold start+i for the i-th block of a segment, and is a hit at a capacity of C blocks
iff its threshold <= C, so a curve answers every capacity (examples/data/README.md).

Two checks per file, over the whole trace:
- every line, byte for byte, against naive_hit_thresholds (all capacities at once);
- the per-request hits of one NaiveLru cache per capacity (the plain simulation, which does
  not rely on the LRU stack property) at capacities on both sides of the curves' own
  breakpoints, from 0 to infinite, against the hits the committed curves give there.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from oracle import INF, NaiveLru, naive_hit_thresholds

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
TRACE_BLOCK = 512  # tokens per hash_id in the Mooncake trace

GOLDEN = [
    pytest.param("conversation_b512", 512, 0, id="b512"),
    pytest.param("conversation_b1024", 1024, 0, id="b1024"),
    pytest.param("conversation_b512_ttl60", 512, 60, id="b512_ttl60"),
]


@cache
def mooncake_requests(block_size: int) -> tuple[list[list[int]], list[int]]:
    """(keys per request, timestamp_ns per request) as examples/data/README.md defines them:
    keys = hash_ids[: input_length // 512]; a coarser block keeps every k-th key (the key of a
    block's last 512 tokens is the prefix hash of the whole coarse block); ms -> ns."""
    k = block_size // TRACE_BLOCK
    requests, times = [], []
    with (DATA / "conversation_trace.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            keys = row["hash_ids"][: row["input_length"] // TRACE_BLOCK]
            requests.append(keys[k - 1 :: k])
            times.append(row["timestamp"] * 1_000_000)
    return requests, times


def curve_text(thresholds: list[int]) -> str:
    """Thresholds as the .curves line: maximal runs of consecutive values, compact JSON."""
    segments: list[list[int]] = []
    for t in thresholds:
        if segments and segments[-1][0] + segments[-1][1] == t:
            segments[-1][1] += 1
        else:
            segments.append([t, 1])
    return json.dumps(segments, separators=(",", ":"))


def thresholds_of(line: str) -> list[int]:
    return [start + i for start, run in json.loads(line) for i in range(run)]


def hits_at(thresholds: list[int], capacity: int | None) -> int:
    return len(thresholds) if capacity is INF else sum(1 for t in thresholds if t <= capacity)


@pytest.mark.parametrize(("name", "block_size", "ttl_seconds"), GOLDEN)
def test_committed_curves_equal_the_naive_thresholds(name: str, block_size: int, ttl_seconds: int) -> None:
    requests, times = mooncake_requests(block_size)
    want = (DATA / f"{name}.curves").read_text()
    got = "".join(curve_text(t) + "\n" for t in naive_hit_thresholds(requests, times, ttl_seconds * 10**9))
    assert len(requests) == want.count("\n") == 12031
    mismatches = [i for i, (g, w) in enumerate(zip(got.splitlines(), want.splitlines(), strict=True)) if g != w]
    assert mismatches == [], f"{name}: {len(mismatches)} requests differ, first at line {mismatches[0] + 1}"
    assert got == want


@pytest.mark.parametrize(("name", "block_size", "ttl_seconds"), GOLDEN)
def test_naive_lru_caches_agree_with_the_committed_curves(name: str, block_size: int, ttl_seconds: int) -> None:
    requests, times = mooncake_requests(block_size)
    committed = [thresholds_of(line) for line in (DATA / f"{name}.curves").read_text().splitlines()]
    # 16 breakpoints spread over the distinct thresholds, each tested at t - 1 (the block misses)
    # and t (it hits), plus the capacities 0 and infinite.
    distinct = sorted({t for thresholds in committed for t in thresholds})
    picks = [distinct[i * (len(distinct) - 1) // 15] for i in range(16)]
    capacities: list[int | None] = [0, *sorted({c for t in picks for c in (t - 1, t)} - {0}), INF]
    for capacity in capacities:
        lru = NaiveLru(capacity, ttl_seconds * 10**9)
        got = [lru.request(keys, now) for keys, now in zip(requests, times, strict=True)]
        want = [hits_at(thresholds, capacity) for thresholds in committed]
        bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
        assert bad == [], f"{name} at {capacity} blocks: {len(bad)} requests differ, first at line {bad[0] + 1}"
    assert sum(hits_at(t, INF) for t in committed) > sum(hits_at(t, picks[len(picks) // 2]) for t in committed) > 0
