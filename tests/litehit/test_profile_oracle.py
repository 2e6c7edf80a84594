"""``litehit profile``: every metric of profile.json against a naive computation
(tests/profile_oracle.py) on hand-made traces with answers worked out by hand (mooncake, TTL
expiry, repeated keys in a request, skew ties, no hits, two standard categories, qwen types and
turns), and on generated traces (several instances, categories, TTL lanes, re-blocking, prefix
hash, equal timestamps, repeated keys); bad input. The hand-made numbers are checked against the
oracle alone too, so the oracle is proven before it judges the command."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import read_facts
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import NaiveLru
from profile_oracle import (
    NS,
    LaneSetup,
    Row,
    capacity_blocks,
    infinite_hits,
    naive_lane_profile,
    qwen_lane_rows,
    qwen_row,
    reuses_of,
    standard_lane_rows,
    standard_row,
    write_config,
    write_jsonl,
)
from test_cli_policies import qwen_trace

from litehit.cli import main

LITEHIT = str(Path(sys.executable).with_name("litehit"))
EXACT = {"p50_s", "p90_s", "p99_s"}  # (int ns difference) / 1e9: no tolerance
E1 = 1 - math.exp(-1)  # the KS distance of n equal reuse times against their own exponential fit
# the keys of M that users rely on (issue 10, and hit_blocks)
M_KEYS = {"requests", "input_tokens", "blocks", "hit_blocks", "hit_tokens", "ideal_hit_ratio", "hit_token_share"}
M_KEYS |= {"multi_turn_share", "reuse_time", "lifespan", "skew"}


def _no_constant(name: str) -> Any:
    raise AssertionError(f"profile.json holds {name}")


def run_profile(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(["profile", *args])
    except SystemExit as exc:  # argparse: no such command yet, or bad flags
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def profiled(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """The lanes of the profile.json written by `litehit profile ARGS -o OUT` (strict JSON: no NaN)."""
    code, err = run_profile([*args, "-o", str(out)], capsys)
    assert code == 0, err
    result = json.loads(out.read_text(), parse_constant=_no_constant)
    lanes: list[dict[str, Any]] = result["lanes"]
    for lane in lanes:
        assert {"lane", "block_size", "block_bytes", "ttl_s", "overall", "categories"} <= set(lane)
        assert M_KEYS | {"capacity", "working_set_60s"} <= set(lane["overall"])
        assert all(set(m) >= M_KEYS for m in lane["categories"].values())
    return lanes


def mismatches(got: Any, want: Any, path: str = "") -> list[str]:
    """Where got differs from want: every key of want must be in got (got may hold more keys,
    except in "categories", which must name exactly the same categories); integers and
    percentiles exact, other floats to 1e-9 relative; null only where null is expected."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: {got!r} is not an object"]
        out = []
        if path.endswith("categories") and set(got) != set(want):
            out.append(f"{path}: categories {sorted(got)} != {sorted(want)}")
        for key, value in want.items():
            if key not in got:
                out.append(f"{path}.{key}: missing")
            else:
                out += mismatches(got[key], value, f"{path}.{key}")
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: {got!r} != {want!r}"]
        return [m for i, (g, w) in enumerate(zip(got, want, strict=True)) for m in mismatches(g, w, f"{path}[{i}]")]
    if want is None or isinstance(want, (str, bool)) or got is None:
        return [] if got == want and type(got) is type(want) else [f"{path}: {got!r} != {want!r}"]
    if isinstance(want, float) and path.rsplit(".", 1)[-1] not in EXACT:
        return [] if got == pytest.approx(want, rel=1e-9, abs=1e-12) else [f"{path}: {got!r} != {want!r}"]
    if isinstance(want, int) and type(got) is not int:  # counts, blocks and bytes are JSON integers
        return [f"{path}: {got!r} is not the integer {want!r}"]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


def assert_lanes(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [g["lane"] for g in got] == [w["lane"] for w in want]
    problems = [m for g, w in zip(got, want, strict=True) for m in mismatches(g, w, g["lane"])]
    assert not problems, "\n".join(problems[:40])


def reuse(count: int, mean: float | None, p50: float | None, p90: float | None, p99: float | None) -> dict[str, Any]:
    """The expected reuse_time object; rate 1/mean and KS left to the caller when they matter."""
    return {"count": count, "mean_s": mean, "p50_s": p50, "p90_s": p90, "p99_s": p99}


NO_REUSE = {"count": 0, "mean_s": None, "p50_s": None, "p90_s": None, "p99_s": None, "exp_rate_per_s": None, "ks": None}
NO_KEYS = {"keys": 0, "p50_s": None, "p90_s": None, "p99_s": None, "never_reused_share": 0.0}
NO_SKEW = {"keys_for_50": 0.0, "keys_for_77": 0.0, "keys_for_90": 0.0, "requests_for_90": 0.0}


# ---------------------------------------------------------------------------------------------
# hand-made cases: the trace, the command line, the oracle's lanes, and the numbers worked out by hand


@dataclass
class HandCase:
    rows: list[dict[str, Any]]  # the trace, one JSON object per line
    args: Callable[[Path, Path], list[str]]  # (trace, tmp dir) -> arguments before -o
    naive: Callable[[], list[dict[str, Any]]]  # the oracle's lanes
    want: list[dict[str, Any]]  # what must hold of every lane (a partial profile)


def mooncake_case() -> HandCase:
    # Mooncake rows (ms timestamps), 512-token blocks, keys = hash_ids[: input_length // 512]:
    #    0 s [1,2,3]      cold                        stack (MRU first) 1 2 3
    #    1 s [1,2,4]      hits 1,2 (1 s each)         thresholds 1,2;   stack 1 2 4 3
    #    3 s [1,2,3,5]    hits 1,2 (2 s), 3 (3 s)     thresholds 1,2,4; stack 1 2 3 5 4
    #  190 s [6]          cold (600 tokens: 1 block)
    #  190 s [6,7]        hits 6 (0 s: same time)     threshold 1
    rows = [(0, [1, 2, 3, 99], 1636), (1000, [1, 2, 4], 1536), (3000, [1, 2, 3, 5], 2048)]
    rows += [(190000, [6, 98], 600), (190000, [6, 7], 1024)]
    trace = [{"timestamp": t, "input_length": n, "hash_ids": ids} for t, ids, n in rows]
    lane = [Row(t * 10**6, ids[: n // 512], n, "all") for t, ids, n in rows]
    # reuse times 0,1,1,2,2,3 s: mean 1.5, rate 2/3; the KS sup sits just after x = 1 s
    reuses = reuse(6, 1.5, 1.0, 3.0, 3.0) | {"exp_rate_per_s": 2 / 3, "ks": 1 - math.exp(-2 / 3) - 1 / 6}
    m = {
        "requests": 5,
        "input_tokens": 6844,
        "blocks": 13,
        "hit_blocks": 6,
        "hit_tokens": 3072,
        "ideal_hit_ratio": 3072 / 6844,
        "hit_token_share": 1.0,
        "multi_turn_share": None,
        "reuse_time": reuses,
        # lifespans: keys 1,2,3 live 3 s; 4,5,6,7 live 0 s; 4,5,7 are in one request only
        "lifespan": {"keys": 7, "p50_s": 0.0, "p90_s": 3.0, "p99_s": 3.0, "never_reused_share": 3 / 7},
        # reuses per key 2,2,1,1,0,0,0 (of 6); hit tokens per request 1536,1024,512,0,0 (of 3072)
        "skew": {"keys_for_50": 2 / 7, "keys_for_77": 3 / 7, "keys_for_90": 4 / 7, "requests_for_90": 3 / 5},
    }
    overall = m | {
        # thresholds 1,1,1,2,2,4: 3 of 6 hits at 1 block, all 6 at 4
        "capacity": {str(p): {"blocks": b, "bytes": 1000 * b} for p, b in [(50, 1), (90, 4), (99, 4)]},
        # {1,2,3,4,5} in minute 0, nothing in minutes 1 and 2, {6,7} in minute 3: p50 of 5,0,0,2 is 0
        "working_set_60s": {"windows": 4, "max": 5, "p50": 0},
    }
    want = {"lane": "b512", "block_size": 512, "block_bytes": 1000, "ttl_s": None, "overall": overall}
    # the category's skew counts only the keys its reuses hit: 2,2,1,1 (of 4 keys)
    category = m | {"skew": {"keys_for_50": 2 / 4, "keys_for_77": 3 / 4, "keys_for_90": 1.0, "requests_for_90": 3 / 5}}
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-bytes", "1000"],
        lambda: [naive_lane_profile("b512", lane, block_size=512, block_bytes=1000)],
        [want | {"categories": {"all": category}}],
    )


def ttl_case() -> HandCase:
    # Standard rows, 4-token blocks, two lanes in one pass: TTL 10 s, then no TTL.
    #  1 s [1,2]     cold
    #  5 s [1,2,3]   TTL lane: hits 1,2 (4 s)                 thresholds 1,2
    # 20 s [1,2,3]   TTL lane: 1 expired (15 s >= 10): no hit, no reuse
    # 25 s [1,4]     TTL lane: hits 1 (5 s)                   threshold 1
    # 35 s [1]       TTL lane: 1 expired (exactly 10 s: alive iff now - last < ttl)
    rows = [(1, [1, 2], 8), (5, [1, 2, 3], 12), (20, [1, 2, 3], 13), (25, [1, 4], 8), (35, [1], 4)]
    trace = [standard_row("x", s * NS, keys, n) for s, keys, n in rows]
    lane = [Row(s * NS, keys, n, "all") for s, keys, n in rows]
    m = {
        "requests": 5,
        "input_tokens": 45,
        "blocks": 11,
        "hit_blocks": 3,
        "hit_tokens": 12,
        "ideal_hit_ratio": 12 / 45,
        "hit_token_share": 1.0,
        "multi_turn_share": None,
        "reuse_time": reuse(3, 13 / 3, 4.0, 5.0, 5.0) | {"exp_rate_per_s": 3 / 13},
        # key 1 lives 1..35 s, 2 1..20, 3 5..20, 4 once at 25 (expired accesses are accesses)
        "lifespan": {"keys": 4, "p50_s": 15.0, "p90_s": 34.0, "p99_s": 34.0, "never_reused_share": 1 / 4},
        # reuses per key 2,1,0,0 (of 3); hit tokens per request 8,4,0,0,0
        "skew": {"keys_for_50": 1 / 4, "keys_for_77": 2 / 4, "keys_for_90": 2 / 4, "requests_for_90": 2 / 5},
    }
    overall = m | {
        "capacity": {str(p): {"blocks": b, "bytes": 100 * b} for p, b in [(50, 1), (90, 2), (99, 2)]},
        "working_set_60s": {"windows": 1, "max": 4, "p50": 4},
    }
    ttl = {"lane": "b4_ttl10", "block_size": 4, "block_bytes": 100, "ttl_s": 10.0, "overall": overall}
    # without TTL every earlier key hits: reuse times 4,4 | 15,15,15 | 5 | 10
    forever_m = {"hit_blocks": 7, "hit_tokens": 28, "reuse_time": reuse(7, 68 / 7, 10.0, 15.0, 15.0)}
    forever = {"lane": "b4", "ttl_s": None, "overall": forever_m, "categories": {"all": forever_m}}
    # the category's skew: keys 1, 2 reused 2, 1 times
    category = m | {"skew": {"keys_for_50": 1 / 2, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 2 / 5}}
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-size", "4", "--block-bytes", "100", "--ttl-seconds", "10,0"],
        lambda: [
            naive_lane_profile("b4_ttl10", lane, block_size=4, block_bytes=100, ttl_ns=10 * NS),
            naive_lane_profile("b4", lane, block_size=4, block_bytes=100),
        ],
        [ttl | {"categories": {"all": category}}, forever],
    )


def repeated_keys_case() -> HandCase:
    # 1 s [7,7,8]    cold at 7: nothing hits               commit 8,7,7: stack 7 8
    # 3 s [7,7,7,9]  hits 7,7,7 (2 s each; 9 cold)          ranks 1,1,1 -> thresholds 1,2,3
    # 4 s [8,7]      hits 8 (3 s), 7 (1 s)                  ranks 3,1 -> thresholds 3,4
    # Thresholds as the facts count them: the k-th hit block of a request needs k slots even
    # when its key repeats (a NaiveLru of 1 block would hit 7,7,7; the facts say 1 of them).
    rows = [(1, [7, 7, 8], 12), (3, [7, 7, 7, 9], 16), (4, [8, 7], 8)]
    trace = [standard_row("x", s * NS, keys, n) for s, keys, n in rows]
    lane = [Row(s * NS, keys, n, "all") for s, keys, n in rows]
    m = {
        "requests": 3,
        "input_tokens": 36,
        "blocks": 9,
        "hit_blocks": 5,
        "hit_tokens": 20,
        "ideal_hit_ratio": 20 / 36,
        "reuse_time": reuse(5, 2.0, 2.0, 3.0, 3.0) | {"exp_rate_per_s": 0.5},  # 2,2,2,3,1
        # 7 and 8 live 1..4 s (in 3 and 2 requests), 9 is in one request
        "lifespan": {"keys": 3, "p50_s": 3.0, "p90_s": 3.0, "p99_s": 3.0, "never_reused_share": 1 / 3},
        # reuses per key 4 (7), 1 (8), 0 (9); hit tokens per request 0,12,8
        "skew": {"keys_for_50": 1 / 3, "keys_for_77": 1 / 3, "keys_for_90": 2 / 3, "requests_for_90": 2 / 3},
    }
    overall = m | {
        # thresholds 1,2,3,3,4: 4 of 5 hits at 3 blocks, all at 4
        "capacity": {str(p): {"blocks": b, "bytes": 100 * b} for p, b in [(50, 3), (90, 4), (99, 4)]},
        "working_set_60s": {"windows": 1, "max": 3, "p50": 3},
    }
    # the category's skew: keys 7, 8 reused 4, 1 times
    category = m | {"skew": {"keys_for_50": 1 / 2, "keys_for_77": 1 / 2, "keys_for_90": 1.0, "requests_for_90": 2 / 3}}
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-size", "4", "--block-bytes", "100"],
        lambda: [naive_lane_profile("b4", lane, block_size=4, block_bytes=100)],
        [{"lane": "b4", "overall": overall, "categories": {"all": category}}],
    )


def skew_ties_case() -> HandCase:
    # keys 1,2,3 each reused once, 3 s after their first use; key 4 never: every sort has ties
    rows = [(1, [1]), (2, [2]), (3, [3]), (4, [1]), (5, [2]), (6, [3]), (7, [4])]
    trace = [standard_row("x", s * NS, keys, 4) for s, keys in rows]
    lane = [Row(s * NS, keys, 4, "all") for s, keys in rows]
    m = {
        "hit_blocks": 3,
        "reuse_time": reuse(3, 3.0, 3.0, 3.0, 3.0) | {"exp_rate_per_s": 1 / 3, "ks": E1},
        "lifespan": {"keys": 4, "p50_s": 3.0, "p90_s": 3.0, "p99_s": 3.0, "never_reused_share": 1 / 4},
        # reuses per key 1,1,1,0 (of 3): 2 keys reach 50%, 3 reach 77% and 90%
        # hit tokens per request 4,4,4,0,0,0,0 (of 12): 3 of 7 requests reach 90%
        "skew": {"keys_for_50": 2 / 4, "keys_for_77": 3 / 4, "keys_for_90": 3 / 4, "requests_for_90": 3 / 7},
    }
    overall = m | {
        "capacity": {str(p): {"blocks": 3, "bytes": 300} for p in (50, 90, 99)},  # every threshold is 3
        "working_set_60s": {"windows": 1, "max": 4, "p50": 4},
    }
    # the category's skew: keys 1, 2, 3 reused once each
    category = m | {"skew": {"keys_for_50": 2 / 3, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 3 / 7}}
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-size", "4", "--block-bytes", "100"],
        lambda: [naive_lane_profile("b4", lane, block_size=4, block_bytes=100)],
        [{"lane": "b4", "overall": overall, "categories": {"all": category}}],
    )


def no_hits_case() -> HandCase:
    # every key is new: zeros and nulls, never a NaN (and a category named "a" beside "all")
    trace = [standard_row("x", NS, [1, 2], 9, "a"), standard_row("x", 2 * NS, [3], 5)]
    lane = [Row(NS, [1, 2], 9, "a"), Row(2 * NS, [3], 5, "all")]
    base: dict[str, Any] = {"hit_blocks": 0, "hit_tokens": 0, "ideal_hit_ratio": 0.0, "hit_token_share": 0.0}
    base |= {"multi_turn_share": None, "reuse_time": NO_REUSE, "skew": NO_SKEW}
    overall = base | {
        "requests": 2,
        "input_tokens": 14,
        "blocks": 3,
        "lifespan": {"keys": 3, "p50_s": 0.0, "p90_s": 0.0, "p99_s": 0.0, "never_reused_share": 1.0},
        "capacity": {str(p): {"blocks": 0, "bytes": 0} for p in (50, 90, 99)},
        "working_set_60s": {"windows": 1, "max": 3, "p50": 3},
    }
    a = base | {"requests": 1, "input_tokens": 9, "blocks": 2, "lifespan": {"keys": 2, "never_reused_share": 1.0}}
    rest = base | {"requests": 1, "input_tokens": 5, "blocks": 1, "lifespan": {"keys": 1, "p50_s": 0.0}}
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-size", "4", "--block-bytes", "100"],
        lambda: [naive_lane_profile("b4", lane, block_size=4, block_bytes=100)],
        [{"lane": "b4", "overall": overall, "categories": {"a": a, "all": rest}}],
    )


def two_categories_case() -> HandCase:
    # A config file with one instance "solo" (trace routing by instance_id), 4-token blocks:
    # 1 s [1,2] chat     cold                                      stack 1 2
    # 2 s [1,2,3] batch  hits 1,2 (1 s)          thresholds 1,2;    stack 1 2 3
    # 4 s [1,2,3] chat   hits 1,2,3 (2 s)        thresholds 1,2,3
    # 5 s [5] (no category: "all")  cold
    trace = [
        standard_row("solo", NS, [1, 2], 8, "chat"),
        standard_row("solo", 2 * NS, [1, 2, 3], 12, "batch"),
        standard_row("solo", 4 * NS, [1, 2, 3], 14, "chat"),
        standard_row("solo", 5 * NS, [5], 4),
    ]
    setup = LaneSetup("solo", 4, 100)
    overall = {
        "requests": 4,
        "input_tokens": 38,
        "blocks": 9,
        "hit_blocks": 5,
        "hit_tokens": 20,
        "ideal_hit_ratio": 20 / 38,
        "hit_token_share": 1.0,
        "reuse_time": reuse(5, 1.6, 2.0, 2.0, 2.0) | {"exp_rate_per_s": 1 / 1.6},
        "lifespan": {"keys": 4, "p50_s": 2.0, "p90_s": 3.0, "p99_s": 3.0, "never_reused_share": 1 / 4},
        # reuses per key 2,2,1,0 (of 5); hit tokens per request 0,8,12,0 (of 20)
        "skew": {"keys_for_50": 2 / 4, "keys_for_77": 2 / 4, "keys_for_90": 3 / 4, "requests_for_90": 2 / 4},
        "capacity": {str(p): {"blocks": b, "bytes": 100 * b} for p, b in [(50, 2), (90, 3), (99, 3)]},
        "working_set_60s": {"windows": 1, "max": 4, "p50": 4},
    }
    chat = {
        "requests": 2,
        "input_tokens": 22,
        "blocks": 5,
        "hit_blocks": 3,
        "hit_tokens": 12,
        "ideal_hit_ratio": 12 / 22,
        "hit_token_share": 0.6,
        "multi_turn_share": None,
        "reuse_time": reuse(3, 2.0, 2.0, 2.0, 2.0) | {"exp_rate_per_s": 0.5, "ks": E1},
        # keys first used by chat: 1 and 2, both live 1..4 s
        "lifespan": {"keys": 2, "p50_s": 3.0, "p90_s": 3.0, "p99_s": 3.0, "never_reused_share": 0.0},
        # chat's reuses hit keys 1,2,3 once each; its requests' hit tokens 0,12
        "skew": {"keys_for_50": 2 / 3, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 1 / 2},
    }
    batch = {
        "requests": 1,
        "input_tokens": 12,
        "blocks": 3,
        "hit_blocks": 2,
        "hit_tokens": 8,
        "ideal_hit_ratio": 8 / 12,
        "hit_token_share": 0.4,
        "reuse_time": reuse(2, 1.0, 1.0, 1.0, 1.0) | {"exp_rate_per_s": 1.0, "ks": E1},
        "lifespan": {"keys": 1, "p50_s": 2.0, "p90_s": 2.0, "p99_s": 2.0, "never_reused_share": 0.0},  # key 3
        "skew": {"keys_for_50": 1 / 2, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 1.0},
    }
    rest = {
        "requests": 1,
        "input_tokens": 4,
        "blocks": 1,
        "hit_tokens": 0,
        "ideal_hit_ratio": 0.0,
        "hit_token_share": 0.0,
        "reuse_time": NO_REUSE,
        "lifespan": {"keys": 1, "p50_s": 0.0, "never_reused_share": 1.0},
        "skew": NO_SKEW,
    }

    def args(t: Path, tmp: Path) -> list[str]:
        return [str(write_config(tmp / "config.json", t, 4, [setup]))]

    return HandCase(
        trace,
        args,
        lambda: [naive_lane_profile("solo", standard_lane_rows(trace, setup, 4), block_size=4, block_bytes=100)],
        [{"lane": "solo", "overall": overall, "categories": {"chat": chat, "batch": batch, "all": rest}}],
    )


def qwen_case() -> HandCase:
    # qwen_bailian, 16-token blocks, prefix hash on: A = (10), B = (10,11), C = (10,11,12),
    # D = (10,11,12,13), E = (10,99).
    #   0 s text t1   [A,B]        cold                                    stack A B
    #  10 s text t2   [A,B,C]      hits A,B (10 s)        thresholds 1,2;   stack A B C
    #  30 s text t3   [A,B,C,D]    hits A,B,C (20 s)      thresholds 1,2,3; stack A B C D
    #  40 s image t5  [A,E]        hits A (10 s)          threshold 1
    # 100 s no type, no turn, input_length 0: no blocks (untyped-1)
    # 130 s image t1  [A]          hits A (90 s)          threshold 1
    trace = [
        qwen_row(1, 0.0, [10, 11], 40, "text", 1),
        qwen_row(1, 10.0, [10, 11, 12], 50, "text", 2),
        qwen_row(1, 30.0, [10, 11, 12, 13], 64, "text", 3),
        qwen_row(2, 40.0, [10, 99], 32, "image", 5),
        qwen_row(3, 100.0, [10, 11], 0, None, None),
        qwen_row(4, 130.0, [10, 7], 20, "image", 1),
    ]
    overall = {
        "requests": 6,
        "input_tokens": 206,
        "blocks": 12,
        "hit_blocks": 7,
        "hit_tokens": 112,
        "ideal_hit_ratio": 112 / 206,
        "hit_token_share": 1.0,
        "multi_turn_share": 3 / 6,
        "reuse_time": reuse(7, 180 / 7, 20.0, 90.0, 90.0),  # 10,10,20,20,20,10,90
        # A 0..130 s, B 0..30, C 10..30, D and E once
        "lifespan": {"keys": 5, "p50_s": 20.0, "p90_s": 130.0, "p99_s": 130.0, "never_reused_share": 2 / 5},
        # reuses per key 4 (A), 2, 1, 0, 0 (of 7); hit tokens per request 48,32,16,16,0,0 (of 112)
        "skew": {"keys_for_50": 1 / 5, "keys_for_77": 2 / 5, "keys_for_90": 3 / 5, "requests_for_90": 4 / 6},
        # thresholds 1,1,1,1,2,2,3
        "capacity": {str(p): {"blocks": b, "bytes": 1024 * b} for p, b in [(50, 1), (90, 3), (99, 3)]},
        # minute 0: A..E; minute 1: only the empty request; minute 2: A
        "working_set_60s": {"windows": 3, "max": 5, "p50": 1},
    }

    def one(requests: int, tokens: int, blocks: int, hits: int, multi: float) -> dict[str, Any]:
        return {
            "requests": requests,
            "input_tokens": tokens,
            "blocks": blocks,
            "hit_blocks": hits,
            "hit_tokens": 16 * hits,
            "ideal_hit_ratio": 16 * hits / tokens if tokens else 0.0,
            "hit_token_share": hits / 7,
            "multi_turn_share": multi,
        }

    def gaps(n: int, s: float) -> dict[str, Any]:
        return reuse(n, s, s, s, s) | {"exp_rate_per_s": 1 / s, "ks": E1}

    def lives(s: float, never: float) -> dict[str, Any]:
        return {"keys": 1, "p50_s": s, "p90_s": s, "p99_s": s, "never_reused_share": never}

    categories = {
        "text-1": one(1, 40, 2, 0, 0.0)
        | {
            "reuse_time": NO_REUSE,
            "lifespan": {"keys": 2, "p50_s": 30.0, "p90_s": 130.0, "p99_s": 130.0, "never_reused_share": 0.0},
            "skew": NO_SKEW,
        },
        "text-2": one(1, 50, 3, 2, 1.0)
        | {
            "reuse_time": gaps(2, 10.0),
            "lifespan": lives(20.0, 0.0),
            "skew": {"keys_for_50": 1 / 2, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 1.0},
        },
        "text-3+": one(1, 64, 4, 3, 1.0)
        | {
            "reuse_time": gaps(3, 20.0),
            "lifespan": lives(0.0, 1.0),
            "skew": {"keys_for_50": 2 / 3, "keys_for_77": 1.0, "keys_for_90": 1.0, "requests_for_90": 1.0},
        },
        "image-3+": one(1, 32, 2, 1, 1.0)
        | {"reuse_time": gaps(1, 10.0), "lifespan": lives(0.0, 1.0), "skew": dict.fromkeys(NO_SKEW, 1.0)},
        "untyped-1": one(1, 0, 0, 0, 0.0) | {"reuse_time": NO_REUSE, "lifespan": NO_KEYS, "skew": NO_SKEW},
        "image-1": one(1, 20, 1, 1, 0.0)
        | {"reuse_time": gaps(1, 90.0), "lifespan": NO_KEYS, "skew": dict.fromkeys(NO_SKEW, 1.0)},
    }
    return HandCase(
        trace,
        lambda t, _: [str(t), "--block-bytes", "1024"],
        lambda: [naive_lane_profile("b16", qwen_lane_rows(trace), block_size=16, block_bytes=1024, qwen=True)],
        [{"lane": "b16", "block_size": 16, "block_bytes": 1024, "overall": overall, "categories": categories}],
    )


HAND_CASES = {
    "mooncake": mooncake_case,
    "ttl_expiry": ttl_case,
    "repeated_keys": repeated_keys_case,
    "skew_ties": skew_ties_case,
    "no_hits": no_hits_case,
    "two_categories": two_categories_case,
    "qwen_types_and_turns": qwen_case,
}


@pytest.mark.parametrize("name", HAND_CASES)
def test_the_oracle_gives_the_hand_made_numbers(name: str) -> None:
    case = HAND_CASES[name]()
    assert_lanes(case.naive(), case.want)


@pytest.mark.parametrize("name", HAND_CASES)
def test_hand_made_traces_give_the_hand_made_numbers(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = HAND_CASES[name]()
    trace = write_jsonl(tmp_path / "trace.jsonl", case.rows)
    lanes = profiled(case.args(trace, tmp_path), tmp_path / "profile.json", capsys)
    assert_lanes(lanes, case.want)
    assert_lanes(lanes, case.naive())  # and every other metric as the oracle computes it


def test_the_oracle_capacity_is_one_naive_lru_per_capacity_on_prefix_closed_keys() -> None:
    """On prefix-closed keys (prefixes of a few prompts), the capacity the oracle reads from
    thresholds is the smallest C at which one NaiveLru of C blocks (TTL applied) reaches X% of
    the infinite-capacity hits."""
    rng = random.Random(7)
    prompts = [[rng.randrange(10**6) for _ in range(6)] for _ in range(8)]
    for ttl in (0, 10 * NS):
        requests: list[tuple[int, list[int]]] = []
        ts = NS
        for _ in range(120):
            ts += rng.choice([0, NS, 2 * NS, 5 * NS])
            requests.append(
                (ts, list(dict.fromkeys([*rng.choice(prompts)[: rng.randint(0, 6)], rng.randrange(10**6)])))
            )
        rows = [Row(ts, keys, 4 * len(keys), "all") for ts, keys in requests]
        infinite = sum(infinite_hits(rows, ttl))
        unique = len({k for _, keys in requests for k in keys})
        hits = []
        for capacity in range(unique + 1):
            lru = NaiveLru(capacity, ttl)
            hits.append(sum(lru.request(keys, ts) for ts, keys in requests))
        assert hits[-1] == infinite > 50
        for percent in (50, 90, 99):
            want = min(c for c in range(unique + 1) if 100 * hits[c] >= percent * infinite)
            assert capacity_blocks(rows, ttl, percent) == want, (ttl, percent)


def test_capacity_counts_hit_blocks_as_the_facts_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # [1] [5] [2] then [1,2]: ranks 3 and 1. An LRU of 3 blocks holds both, but the facts (the
    # original tool's curve, `litehit query`, the replay summary) let a request's k-th hit block
    # need k slots at least, and more than the block before it: thresholds 3, 4.
    trace = write_jsonl(
        tmp_path / "trace.jsonl",
        [standard_row("x", NS, [k], 4, trace_id=f"r{k}") for k in (1, 5, 2)] + [standard_row("x", NS, [1, 2], 8)],
    )
    (lane,) = profiled([str(trace), "--block-size", "4", "--block-bytes", "100"], tmp_path / "p.json", capsys)
    assert lane["overall"]["capacity"] == {
        "50": {"bytes": 300, "blocks": 3},
        "90": {"bytes": 400, "blocks": 4},
        "99": {"bytes": 400, "blocks": 4},
    }
    assert main(["replay", str(trace), "--block-size", "4", "-o", str(tmp_path / "facts")]) == 0
    assert read_facts(tmp_path / "facts" / "litehit_facts.csv")[-1]["hit_curve"] == "[[3,2]]"
    rows = [Row(NS, [1], 4, "all"), Row(NS, [5], 4, "all"), Row(NS, [2], 4, "all"), Row(NS, [1, 2], 8, "all")]
    assert_lanes([lane], [naive_lane_profile("b4", rows, block_size=4, block_bytes=100)])


def test_the_no_hit_profile_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = no_hits_case()
    trace = write_jsonl(tmp_path / "trace.jsonl", case.rows)
    out = tmp_path / "profile.json"
    code, err = run_profile([*case.args(trace, tmp_path), "-o", str(out)], capsys)
    assert code == 0, err
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=_no_constant)


# ---------------------------------------------------------------------------------------------
# generated traces against the oracle


def standard_trace(rng: random.Random, instances: list[str], n: int) -> list[dict[str, Any]]:
    """Standard rows over a few shared prompts: prefixes extended or cut, now and then a key
    repeated inside a request or an empty request, equal timestamps, gaps from 0 to 2 minutes
    (TTL expiries, several 60 s windows), three categories (one of them absent), some writes."""
    prompts = [[rng.randrange(1, 10**6) for _ in range(rng.randint(1, 8))] for _ in range(6)]
    rows: list[dict[str, Any]] = []
    ts = NS
    for i in range(n):
        ts += (
            rng.choice([0, 0, 10**6, NS // 2, NS, 2 * NS, 3 * NS, 7 * NS, 10 * NS]) if rng.random() > 0.04 else 65 * NS
        )
        inst = instances[i % len(instances)] if i < len(instances) else rng.choice(instances)
        if rng.random() < 0.05:
            rows.append({"type": "write", "instance_id": inst, "trace_id": f"w{i}", "timestamp_ns": ts, "keys": [1]})
            continue
        prompt = rng.choice(prompts)
        keys = prompt[: rng.randint(len(prompt) // 2, len(prompt)) if rng.random() > 0.1 else 0] + [
            rng.randrange(1, 10**6) for _ in range(rng.randint(0, 2))
        ]
        if keys and rng.random() < 0.1:
            keys.insert(rng.randrange(len(keys)), rng.choice(keys))
        if rng.random() < 0.3:
            prompt[:] = keys or prompt  # the prompt grows (or shrinks) like a conversation
        category = rng.choice(["chat", "code", None])
        rows.append(standard_row(inst, ts, keys, 4 * len(keys) + rng.randint(0, 3) or 1, category, f"r{i}"))
    return rows


SETUPS = [
    LaneSetup("i0", 4, 100),
    LaneSetup("i1", 8, 200, ttl_seconds=120),  # re-blocked: every 2nd key
    LaneSetup("i2", 4, 100, ttl_seconds=30, prefix_hash=True),
]


@pytest.fixture
def sorted_not_tallied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every lifespan tally with two or more distinct values is sorted instead of tallied (a
    trace with more distinct values than MAX_TALLIED): the list fills with the sizes of the
    arrays that took that path. (Reuse times come in runs, tallied whatever their number.)"""
    import core_c.profile
    import litehit.profile.metrics as metrics

    sorted_sizes: list[int] = []
    tally = core_c.profile.tally

    def spy(values: Any, max_distinct: int, weights: Any = None) -> Any:
        found = tally(values, max_distinct, weights)
        if found is None:
            sorted_sizes.append(len(values))
        return found

    monkeypatch.setattr(metrics, "MAX_TALLIED", 1)
    monkeypatch.setattr(core_c.profile, "tally", spy)
    return sorted_sizes


@pytest.mark.parametrize(("seed", "fanout"), [(1, False), (4, True)])
def test_sorted_reuse_times_match_the_oracle(
    seed: int, fanout: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], sorted_not_tallied: list[int]
) -> None:
    """The path of traces with too many distinct lifespans to tally: the same numbers."""
    test_generated_standard_traces_match_the_oracle(seed, fanout, tmp_path, capsys)
    assert len(sorted_not_tallied) >= len(SETUPS) and max(sorted_not_tallied) > 20


@pytest.mark.parametrize(("seed", "fanout"), [(1, False), (2, False), (3, True), (4, True)])
def test_generated_standard_traces_match_the_oracle(
    seed: int, fanout: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(seed)
    rows = standard_trace(rng, [s.instance_id for s in SETUPS], 240)
    trace = write_jsonl(tmp_path / "trace.jsonl", rows)
    config = write_config(tmp_path / "config.json", trace, 4, SETUPS, fanout=fanout)
    lanes = profiled([str(config)], tmp_path / "profile.json", capsys)
    want = []
    for setup in SETUPS:
        lane_rows = standard_lane_rows(rows, setup, 4, fanout=fanout)
        want.append(
            naive_lane_profile(
                setup.instance_id,
                lane_rows,
                block_size=setup.block_size,
                block_bytes=setup.block_bytes,
                ttl_ns=setup.ttl_seconds * NS,
            )
        )
    assert_lanes(lanes, want)
    # the generator exercises what it claims to
    for lane in want:
        assert lane["overall"]["hit_blocks"] > 20 and len(lane["categories"]) == 3
        assert lane["overall"]["working_set_60s"]["windows"] > 3
    lane_rows = standard_lane_rows(rows, SETUPS[0], 4, fanout=fanout)
    assert any(len(set(r.keys)) < len(r.keys) for r in lane_rows)  # a key repeated inside a request
    assert any(r.keys == [] for r in lane_rows)
    if fanout:  # a hit on a key used at the same timestamp: reuse time 0
        assert any(u.ns == 0 for u in reuses_of(lane_rows, infinite_hits(lane_rows, 0)))


def test_the_capacity_is_the_replay_summary_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repeated keys included: the profile's capacities and plateau are those `litehit replay`
    reports for the same config, lane by lane, in the same order."""
    rows = standard_trace(random.Random(5), [s.instance_id for s in SETUPS], 240)
    trace = write_jsonl(tmp_path / "trace.jsonl", rows)
    config = write_config(tmp_path / "config.json", trace, 4, SETUPS, fanout=True)
    lanes = profiled([str(config)], tmp_path / "profile.json", capsys)
    assert main(["replay", str(config), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [lane["lane"] for lane in lanes] == [s["instance_id"] for s in summary["lanes"]] == ["i0", "i1", "i2"]
    for lane, replayed in zip(lanes, summary["lanes"], strict=True):
        want = {str(round(100 * p["fraction"])): p["capacity_blocks"] for p in replayed["plateau_fractions"]}
        assert {name: c["blocks"] for name, c in lane["overall"]["capacity"].items()} == want
        assert lane["overall"]["hit_tokens"] == replayed["plateau"]["hit_tokens"]
        assert lane["overall"]["input_tokens"] == replayed["total_input_tokens"]


def test_the_categories_add_up_to_the_lane(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = standard_trace(random.Random(6), [s.instance_id for s in SETUPS], 240)
    config = write_config(tmp_path / "config.json", write_jsonl(tmp_path / "trace.jsonl", rows), 4, SETUPS)
    for lane in profiled([str(config)], tmp_path / "profile.json", capsys):
        overall, categories = lane["overall"], lane["categories"].values()
        assert sum(m["hit_token_share"] for m in categories) == pytest.approx(1.0)
        for name in ("requests", "input_tokens", "blocks", "hit_blocks", "hit_tokens"):
            assert sum(m[name] for m in categories) == overall[name], name
        assert sum(m["lifespan"]["keys"] for m in categories) == overall["lifespan"]["keys"]
        assert sum(m["reuse_time"]["count"] for m in categories) == overall["reuse_time"]["count"]
        assert overall["reuse_time"]["count"] == overall["hit_blocks"] > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_qwen_traces_match_the_oracle(seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "qwen.jsonl"
    rows = qwen_trace(trace, seed)
    lanes = profiled(
        [str(trace), "--block-sizes", "16,32", "--ttl-seconds", "0,300", "--block-bytes", "1024"],
        tmp_path / "profile.json",
        capsys,
    )
    want = [
        naive_lane_profile(
            f"b{bs}" + (f"_ttl{ttl}" if ttl else ""),
            qwen_lane_rows(rows, 16, bs),
            block_size=bs,
            block_bytes=1024 * bs // 16,
            ttl_ns=ttl * NS,
            qwen=True,
        )
        for ttl in (0, 300)
        for bs in (16, 32)
    ]
    assert_lanes(lanes, want)
    assert len(want[0]["categories"]) >= 5 and want[0]["overall"]["multi_turn_share"] > 0.3
    assert want[2]["overall"]["hit_blocks"] < want[0]["overall"]["hit_blocks"]  # the TTL cuts hits


@settings(max_examples=30, deadline=None, database=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([0, 1, NS, 59 * NS, 61 * NS]),
            st.lists(st.integers(1, 4), max_size=5),
            st.sampled_from(["a", "b", None]),
        ),
        min_size=1,
        max_size=12,
    ),
    ttl=st.sampled_from([0, 1, 60]),
)
def test_small_generated_traces_match_the_oracle(steps: list[tuple[int, list[int], str | None]], ttl: int) -> None:
    """Few keys, so ties, repeats inside a request and equal timestamps are everywhere."""
    rows, ts = [], NS
    for i, (gap, keys, category) in enumerate(steps):
        ts += gap
        rows.append(standard_row("x", ts, keys, 4 * len(keys) + 1, category, f"r{i}"))
    setup = LaneSetup("x", 4, 100, ttl_seconds=ttl)
    want = [naive_lane_profile("x", standard_lane_rows(rows, setup, 4), block_size=4, block_bytes=100, ttl_ns=ttl * NS)]
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_jsonl(Path(tmp) / "trace.jsonl", rows)
        config = write_config(Path(tmp) / "config.json", trace, 4, [setup])
        out = Path(tmp) / "profile.json"
        try:
            code = main(["profile", str(config), "-o", str(out)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        assert code == 0
        assert_lanes(json.loads(out.read_text(), parse_constant=_no_constant)["lanes"], want)


# ---------------------------------------------------------------------------------------------
# bad input


def test_a_trace_the_replay_rejects_writes_nothing(tmp_path: Path) -> None:
    trace = write_jsonl(
        tmp_path / "trace.jsonl",
        [standard_row("x", 5 * NS, [1], 4, trace_id="a"), standard_row("x", 4 * NS, [1], 4, trace_id="b")],
    )
    out = tmp_path / "profile.json"
    run = subprocess.run(
        [LITEHIT, "profile", str(trace), "--block-size", "4", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("litehit: error: ")
    assert "not sorted by timestamp_ns at trace_id[b]" in run.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [trace]


def test_a_bad_config_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_jsonl(tmp_path / "trace.jsonl", [standard_row("x", NS, [1], 4)])
    config = write_config(tmp_path / "config.json", trace, 4, [LaneSetup("x", 6, 100)])  # 6: not a multiple of 4
    out = tmp_path / "profile.json"
    code, err = run_profile([str(config), "-o", str(out)], capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("litehit: error: ") and "re-blocking is coarsening only" in err
    assert not out.exists()


def test_a_row_the_replay_rejects_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [standard_row("x", NS, [1], 4), standard_row("x", 2 * NS, [1, 2], 5)]  # 5 tokens: 1 block, not 2
    trace = write_jsonl(tmp_path / "trace.jsonl", rows)
    out = tmp_path / "profile.json"
    code, err = run_profile([str(trace), "--block-size", "4", "-o", str(out)], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "exactly floor(input_token_len / trace_block_size) blocks" in err
    assert not out.exists()
