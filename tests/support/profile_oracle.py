"""A deliberately naive workload profile (issue 10), for differential tests of ``litehit profile``.

Every metric of one lane of profile.json, computed from the lane's requests in trace order with
plain lists and dicts: the infinite-capacity prefix hits come from tests/oracle.py's NaiveLru
(TTL applied), the capacity thresholds from its naive_hit_thresholds (with the facts' rule that
a request's k-th hit block needs k slots); reuse times, lifespans, skew and working sets are
counted straight from their definitions. Nothing is shared with
litehit.profile or the C engine. Also: small writers of standard / qwen_bailian traces and
configs, and the lane keys the replay feeds its engine (routing, prefix hash, re-blocking).
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

from oracle import NaiveLru, naive_hit_thresholds

NS = 10**9
WINDOW_NS = 60 * NS
QUANTILES = {"p50_s": "0.5", "p90_s": "0.9", "p99_s": "0.99"}
SKEW_PERCENTS = {"keys_for_50": 50, "keys_for_77": 77, "keys_for_90": 90}
CAPACITY_PERCENTS = (50, 90, 99)

Key = Hashable


@dataclass(frozen=True)
class Row:
    """One request of a lane: time (ns), the lane's keys, input tokens, category name."""

    ts: int
    keys: Sequence[Key]
    input_len: int
    category: str


@dataclass(frozen=True)
class Reuse:
    """One hit block: the hitting request, its key, the time since the key's previous access (ns)."""

    request: int
    key: Key
    ns: int


# ---------------------------------------------------------------------------------------------
# keys and categories as the replay sees them


def lane_keys(raw: Sequence[int], trace_block: int, block_size: int, prefix_hash: bool) -> list[Key]:
    """The normalized keys of one request: with the prefix hash, key j stands for the whole
    prefix raw[0..j] (a tuple: equal keys iff equal prefixes); re-blocking to block_size keeps
    every k-th key (k = block_size / trace_block), dropping a tail of fewer than k."""
    keys: list[Key] = [tuple(raw[: j + 1]) for j in range(len(raw))] if prefix_hash else list(raw)
    k = block_size // trace_block
    assert k * trace_block == block_size
    return keys[k - 1 :: k]


def qwen_category(kind: str | None, turn: int | None) -> str:
    """type + '-' + turn bucket; no type -> untyped, no turn -> 1."""
    bucket = {1: "1", 2: "2"}.get(max(turn or 1, 1), "3+")
    return f"{kind if kind is not None else 'untyped'}-{bucket}"


# ---------------------------------------------------------------------------------------------
# small statistics, straight from the definitions


def nearest_rank(values: Sequence[int], q: str) -> int:
    """The smallest v with at least ceil(q n) values <= v (q read as the decimal string given)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Fraction(q) * len(ordered))) - 1]


def top_fraction(weights: Sequence[int], percent: int, population: int) -> float:
    """k / population, k the fewest largest weights whose sum reaches percent% of the total
    (100 cum >= percent total); 0.0 when the total is 0."""
    total = sum(weights)
    if total == 0:
        return 0.0
    cum = 0
    for k, w in enumerate(sorted(weights, reverse=True), start=1):
        cum += w
        if 100 * cum >= percent * total:
            return k / population
    raise AssertionError("unreachable: the whole sum reaches every percent")


def ks_exponential(seconds: Sequence[float], rate: float) -> float:
    """sup |ECDF - (1 - exp(-rate x))| over the sorted sample."""
    xs = sorted(seconds)
    n = len(xs)
    worst = 0.0
    for i, x in enumerate(xs, start=1):
        f = 1.0 - math.exp(-rate * x)
        worst = max(worst, i / n - f, f - (i - 1) / n)
    return worst


def reuse_time(ns: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"count": len(ns), "mean_s": None, "exp_rate_per_s": None, "ks": None}
    out |= dict.fromkeys(QUANTILES)
    if not ns:
        return out
    seconds = [v / NS for v in ns]
    mean = math.fsum(seconds) / len(seconds)
    out["mean_s"] = mean
    for name, q in QUANTILES.items():
        out[name] = nearest_rank(ns, q) / NS
    if mean > 0:
        out["exp_rate_per_s"] = 1 / mean
        out["ks"] = ks_exponential(seconds, 1 / mean)
    return out


def lifespan(spans_ns: Sequence[int], accesses: Sequence[int]) -> dict[str, Any]:
    """Lifespans of some keys (last - first access, ns) and their numbers of accessing requests."""
    n = len(spans_ns)
    out: dict[str, Any] = {"keys": n, **dict.fromkeys(QUANTILES), "never_reused_share": 0.0}
    if n:
        for name, q in QUANTILES.items():
            out[name] = nearest_rank(spans_ns, q) / NS
        out["never_reused_share"] = sum(1 for a in accesses if a == 1) / n
    return out


# ---------------------------------------------------------------------------------------------
# the profile of a lane


def _as_ints(keys: Sequence[Key]) -> Sequence[int]:
    """tests/oracle.py is typed for int keys; prefix keys (tuples) work the same: its caches
    only hash and compare keys."""
    return cast(Sequence[int], keys)


def infinite_hits(rows: Sequence[Row], ttl_ns: int) -> list[int]:
    """Prefix hit blocks of every request at infinite capacity (TTL applied)."""
    lru = NaiveLru(None, ttl_ns)
    return [lru.request(_as_ints(r.keys), r.ts) for r in rows]


def reuses_of(rows: Sequence[Row], hits: Sequence[int]) -> list[Reuse]:
    """Every hit block, with the time since the latest earlier request containing its key."""
    latest: dict[Key, int] = {}  # key -> largest timestamp of a request so far containing it
    out = []
    for index, (r, h) in enumerate(zip(rows, hits, strict=True)):
        for position in range(h):
            key = r.keys[position]
            out.append(Reuse(index, key, r.ts - latest[key]))
        for key in r.keys:
            latest[key] = max(latest.get(key, r.ts), r.ts)
    return out


def facts_thresholds(rows: Sequence[Row], ttl_ns: int) -> list[list[int]]:
    """Per request, the capacity (blocks) each of its hit blocks needs, as the facts curves and
    `litehit query` count it: naive_hit_thresholds, then the original tool's monotone rule (the
    engine's "monotone defense"): a hit block needs more capacity than the one before it, so
    the k hit blocks of a request need k slots. On prefix-closed keys (prefix hashes: a key's
    predecessors are always more recent than it) the rule changes nothing; it differs from one
    NaiveLru per capacity when a key repeats inside a request, or when a request's later key is
    more recent than an earlier one (ranks 3 then 1: thresholds 3, 4, where an LRU of 3 holds both)."""
    out = []
    for thresholds in naive_hit_thresholds([_as_ints(r.keys) for r in rows], [r.ts for r in rows], ttl_ns):
        raised: list[int] = []
        for t in thresholds:
            raised.append(max(t, raised[-1] + 1) if raised else t)
        out.append(raised)
    return out


def capacity_blocks(rows: Sequence[Row], ttl_ns: int, percent: int) -> int:
    """The smallest LRU capacity (blocks) whose hit blocks reach percent% of the infinite ones."""
    thresholds = [t for ts in facts_thresholds(rows, ttl_ns) for t in ts]
    if not thresholds:
        return 0
    for capacity in sorted(set(thresholds)):
        if 100 * sum(1 for t in thresholds if t <= capacity) >= percent * len(thresholds):
            return capacity
    raise AssertionError("unreachable: the largest threshold holds every hit")


def working_set(rows: Sequence[Row]) -> dict[str, Any]:
    """Distinct keys per aligned 60 s window, every window from the first request's to the last's."""
    first, last = rows[0].ts // WINDOW_NS, rows[-1].ts // WINDOW_NS
    keys: dict[int, set[Key]] = {w: set() for w in range(first, last + 1)}
    for r in rows:
        keys[r.ts // WINDOW_NS].update(r.keys)
    sizes = [len(keys[w]) for w in range(first, last + 1)]
    return {"windows": len(sizes), "max": max(sizes), "p50": nearest_rank(sizes, "0.5")}


def naive_lane_profile(
    lane: str, rows: Sequence[Row], *, block_size: int, block_bytes: int, ttl_ns: int = 0, qwen: bool = False
) -> dict[str, Any]:
    """One entry of profile.json's "lanes", computed naively."""
    hits = infinite_hits(rows, ttl_ns)
    reuses = reuses_of(rows, hits)
    first: dict[Key, int] = {}
    last: dict[Key, int] = {}
    first_category: dict[Key, str] = {}
    accesses: dict[Key, int] = {}  # key -> number of requests containing it
    for r in rows:
        for key in set(r.keys):
            if key not in first:
                first[key], first_category[key] = r.ts, r.category
            last[key] = r.ts
            accesses[key] = accesses.get(key, 0) + 1
    lane_hit_tokens = sum(hits) * block_size

    def metrics(category: str | None) -> dict[str, Any]:
        """M over the requests of a category (None: every request of the lane)."""
        mine = [i for i, r in enumerate(rows) if category is None or r.category == category]
        my_reuses = [u for u in reuses if category is None or rows[u.request].category == category]
        my_keys = [k for k in first if category is None or first_category[k] == category]
        input_tokens = sum(rows[i].input_len for i in mine)
        hit_blocks = sum(hits[i] for i in mine)
        hit_tokens = hit_blocks * block_size
        reuse_counts: dict[Key, int] = {}
        if category is None:
            reuse_counts = dict.fromkeys(first, 0)  # every key of the lane, reused or not
        for u in my_reuses:
            reuse_counts[u.key] = reuse_counts.get(u.key, 0) + 1
        request_hit_tokens = [hits[i] * block_size for i in mine]
        multi_turn = None
        if qwen:
            multi = [i for i in mine if rows[i].category.endswith(("-2", "-3+"))]
            multi_turn = len(multi) / len(mine)
        return {
            "requests": len(mine),
            "input_tokens": input_tokens,
            "blocks": sum(len(rows[i].keys) for i in mine),
            "hit_blocks": hit_blocks,
            "hit_tokens": hit_tokens,
            "ideal_hit_ratio": hit_tokens / input_tokens if input_tokens else 0.0,
            "hit_token_share": hit_tokens / lane_hit_tokens if lane_hit_tokens else 0.0,
            "multi_turn_share": multi_turn,
            "reuse_time": reuse_time([u.ns for u in my_reuses]),
            "lifespan": lifespan([last[k] - first[k] for k in my_keys], [accesses[k] for k in my_keys]),
            "skew": {
                **{
                    name: top_fraction(list(reuse_counts.values()), percent, len(reuse_counts))
                    for name, percent in SKEW_PERCENTS.items()
                },
                "requests_for_90": top_fraction(request_hit_tokens, 90, len(mine)),
            },
        }

    overall = metrics(None)
    overall["capacity"] = {}
    for percent in CAPACITY_PERCENTS:
        blocks = capacity_blocks(rows, ttl_ns, percent)
        overall["capacity"][str(percent)] = {"bytes": blocks * block_bytes, "blocks": blocks}
    overall["working_set_60s"] = working_set(rows)
    return {
        "lane": lane,
        "block_size": block_size,
        "block_bytes": block_bytes,
        "ttl_s": ttl_ns / NS if ttl_ns else None,
        "overall": overall,
        "categories": {c: metrics(c) for c in dict.fromkeys(r.category for r in rows)},
    }


# ---------------------------------------------------------------------------------------------
# traces and configs


def standard_row(
    inst: str, ts: int, keys: Sequence[int], input_len: int, category: str | None = None, trace_id: str = ""
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "type": "request",
        "instance_id": inst,
        "trace_id": trace_id or f"{inst}-{ts}",
        "timestamp_ns": ts,
        "keys": list(keys),
        "input_len": input_len,
    }
    if category is not None:
        row["category"] = category
    return row


def qwen_row(
    chat: int, seconds: float, hash_ids: Sequence[int], input_length: int, kind: str | None, turn: int | None
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "chat_id": chat,
        "timestamp": seconds,
        "input_length": input_length,
        "hash_ids": list(hash_ids),
    }
    if kind is not None:
        row["type"] = kind
    if turn is not None:
        row["turn"] = turn
    return row


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@dataclass(frozen=True)
class LaneSetup:
    instance_id: str
    block_size: int
    block_bytes: int
    ttl_seconds: int = 0
    prefix_hash: bool | None = None  # None: the format's default


def write_config(
    path: Path, trace: Path, trace_block: int, lanes: Sequence[LaneSetup], *, fanout: bool = False
) -> Path:
    """An original offline config: one group per lane (its TTL and prefix hash), one instance each."""
    groups, instances = [], []
    for setup in lanes:
        group: dict[str, Any] = {"name": f"g_{setup.instance_id}", "ttl_seconds": setup.ttl_seconds}
        if setup.prefix_hash is not None:
            group["enable_prefix_hash"] = setup.prefix_hash
        groups.append(group)
        instances.append(
            {
                "instance_group_name": group["name"],
                "instance_id": setup.instance_id,
                "block_size": setup.block_size,
                "location_spec_infos": [{"name": "kv", "size": setup.block_bytes}],
                "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
                "optimizer_state_info": {"full_location_spec_group_name": "full"},
            }
        )
    config: dict[str, Any] = {
        "trace_file_path": str(trace),
        "output_result_path": str(path.parent / "replay-out"),
        "block_size": trace_block,
        "instance_groups": groups,
        "instances": instances,
    }
    if fanout:
        config["fanout_all_instances"] = True
    path.write_text(json.dumps(config))
    return path


def standard_lane_rows(
    rows: Sequence[dict[str, Any]], setup: LaneSetup, trace_block: int, *, fanout: bool = False
) -> list[Row]:
    """The requests a lane of a standard trace sees: its instance's reads (every read with
    fanout), keys normalized as the replay does (standard: prefix hash off unless configured)."""
    return [
        Row(
            r["timestamp_ns"],
            lane_keys(r["keys"], trace_block, setup.block_size, bool(setup.prefix_hash)),
            r["input_len"],
            r.get("category") or "all",
        )
        for r in rows
        if r["type"] != "write" and (fanout or r["instance_id"] == setup.instance_id)
    ]


def qwen_lane_rows(rows: Sequence[dict[str, Any]], trace_block: int = 16, block_size: int = 16) -> list[Row]:
    """The requests of a qwen_bailian trace (one lane, prefix hash on by default): keys =
    hash_ids[: input_length // trace_block]; timestamp_ns = int(timestamp * 1e9)."""
    out = []
    for r in rows:
        raw = r["hash_ids"][: r["input_length"] // trace_block]
        out.append(
            Row(
                int(r["timestamp"] * 1e9),
                lane_keys(raw, trace_block, block_size, True),
                r["input_length"],
                qwen_category(r.get("type"), r.get("turn")),
            )
        )
    return out
