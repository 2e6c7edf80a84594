"""routes.json: per router, the replicas' hits at each asked per-replica capacity, the load
imbalance, the difference to round_robin, and the exact aggregate curve, from the per-router facts
the routed replay published (every capacity -> hits step through the projector).

Token accounting as the query's: hit tokens = hit blocks x block size; prefill tokens = input
tokens - hit tokens; hit rate = sum of hit tokens / sum of input tokens over all replicas.
Imbalance (prefill tokens as the load): ``max_over_mean`` = the largest replica's prefill tokens
over the whole trace / the mean over the N replicas; ``p99_over_mean`` = the nearest-rank p99, over
the aligned windows floor(timestamp_ns / W) in which a request arrived, of the same ratio within
the window. A ratio whose mean is 0 (nothing to prefill) is 1.0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c.project import project_batch
from litehit.capacity import CapacitySlot
from litehit.routes.options import Router, RoutesOptions
from litehit.tiers.config import parse_capacity
from litehit.tiers.lanes import LaneFacts
from litehit.tiers.planner import lane_breakpoints

__all__ = ["DEFINITIONS", "ReplicaRows", "capacity_entry", "facts_file_name", "imbalance", "routes_document"]

Int64Array = npt.NDArray[np.int64]
DEFINITIONS = {
    "hit_rate": "sum of hit tokens / sum of input tokens over all replicas (hit tokens = hit blocks x block size)",
    "capacity": "per replica: every replica has this capacity",
    "max_over_mean": "the largest replica's prefill tokens (input - hit) over the trace / the mean over the replicas",
    "p99_over_mean": "nearest-rank p99 over the windows floor(timestamp_ns / W) holding a request of the same "
    "ratio within the window",
    "vs_round_robin": "hit_rate - round_robin's hit_rate at the same capacity",
    "curve": "columns capacity_blocks[i] (from 0, increasing) and hit_tokens[i]: the aggregate hit tokens from "
    "capacity_blocks[i] blocks per replica on (hit rate = hit_tokens[i] / input_tokens), one entry at every "
    "capacity where it changes "
    "(null for least_loaded and cache_aware: they are simulated at the asked capacities only)",
    "facts": "the router's per-replica facts (lanes r0..r{N-1}), a file in the folder of routes.json "
    "(null for least_loaded and cache_aware)",
    "load": "least_loaded, cache_aware: a replica's prefill tokens of the earlier requests routed to it with "
    "timestamps in (t - W, t], W = load_window_s; the mean is over all replicas",
    "least_loaded": "the replica with the smallest load, ties to the lowest index",
    "cache_aware": "the replica with the longest resident prefix (ties: smaller load, lower index), or the "
    "least-loaded one when its load > (1 + balance_threshold) x the mean load (exact arithmetic)",
}


def facts_file_name(router: Router | str) -> str:
    return f"routes_{Router(router).value}_facts.csv"


class ReplicaRows:
    """One replica's facts rows as the routed replay writes them, chunk after chunk: what its
    facts file holds, kept in memory for the document (so it is not read back)."""

    def __init__(self, name: str, block_size: int, block_bytes: int) -> None:
        self.name, self.block_size, self.block_bytes = name, block_size, block_bytes
        self.input_len: list[Int64Array] = []
        self.timestamp: list[Int64Array] = []
        self.counts: list[Int64Array] = []
        self.segs: list[Int64Array] = []

    def add(
        self, input_lens: Int64Array, timestamps: Int64Array, segments: Int64Array, seg_offsets: Int64Array
    ) -> None:
        self.input_len.append(input_lens)
        self.timestamp.append(timestamps)
        self.counts.append(np.diff(seg_offsets))
        self.segs.append(segments.reshape(-1, 2))

    def lane(self) -> LaneFacts:
        def joined(parts: list[Int64Array], empty: Int64Array) -> Int64Array:
            return np.concatenate(parts).astype(np.int64, copy=False) if parts else empty

        input_len = joined(self.input_len, np.zeros(0, np.int64))
        offsets = np.zeros(len(input_len) + 1, np.int64)
        np.cumsum(joined(self.counts, np.zeros(0, np.int64)), out=offsets[1:])
        return LaneFacts(
            self.name,
            input_len,
            np.full(len(input_len), self.block_size, np.int64),
            np.full(len(input_len), self.block_bytes, np.int64),
            joined(self.timestamp, np.zeros(0, np.int64)),
            offsets,
            joined(self.segs, np.zeros((0, 2), np.int64)),
        )


def _pooled(lanes: Sequence[LaneFacts]) -> tuple[LaneFacts, Int64Array]:
    """Every replica's rows as one lane (for the curve and the windows), and each row's replica."""
    seg_counts = [len(lane.segs) for lane in lanes]
    offsets = [np.zeros(1, np.int64)]
    base = 0
    for lane, count in zip(lanes, seg_counts, strict=True):
        offsets.append(lane.seg_offsets[1:] + base)
        base += count
    pool = LaneFacts(
        "pool",
        np.concatenate([lane.input_len for lane in lanes]),
        np.concatenate([lane.block_size for lane in lanes]),
        np.concatenate([lane.block_bytes for lane in lanes]),
        np.concatenate([lane.timestamp for lane in lanes]),
        np.concatenate(offsets),
        np.concatenate([lane.segs for lane in lanes]),
    )
    replica = np.concatenate([np.full(lane.requests, j, np.int64) for j, lane in enumerate(lanes)])
    return pool, replica


def _sums(groups: Int64Array, values: Int64Array, n: int) -> Int64Array:
    """Exact integer sums of values per group 0..n-1."""
    out = np.zeros(n, np.int64)
    np.add.at(out, groups, values)
    return out


def _ratio(loads: Int64Array) -> float:
    """max / mean of one row of per-replica loads (1.0 when the mean is 0)."""
    total = int(loads.sum())
    return 1.0 if total == 0 else float(int(loads.max()) * len(loads) / total)


def imbalance(
    prefill: Int64Array, replica: Int64Array, timestamp: Int64Array, replicas: int, window_ns: int
) -> dict[str, float]:
    """max_over_mean over the trace and the nearest-rank p99 of the windows' ratios."""
    totals = _sums(replica, prefill, replicas)
    window = timestamp // window_ns
    ids, at = np.unique(window, return_inverse=True)
    per_window = np.zeros((len(ids), replicas), np.int64)
    np.add.at(per_window, (at, replica), prefill)
    ratios = sorted(_ratio(row) for row in per_window)
    p99 = ratios[-(-99 * len(ratios) // 100) - 1] if ratios else 1.0
    return {"max_over_mean": _ratio(totals), "p99_over_mean": p99}


def _block_shape(lanes: Sequence[LaneFacts]) -> tuple[int, int]:
    for lane in lanes:
        uniform = lane.uniform()
        if uniform is not None:
            return uniform
    return 1, 1


def capacity_entry(
    text: str,
    blocks: int | None,
    input_len: Int64Array,
    hit_tokens: Int64Array,
    replica: Int64Array,
    timestamp: Int64Array,
    options: RoutesOptions,
) -> dict[str, Any]:
    """One capacity's numbers of a router from its requests (any order): their tokens, hit
    tokens, replica and timestamp."""
    prefill = input_len - hit_tokens
    n = options.replicas
    requests = np.bincount(replica, minlength=n)
    inputs, hit_sums, prefill_sums = (_sums(replica, v, n) for v in (input_len, hit_tokens, prefill))
    per = [
        {
            "replica": j,
            "requests": int(requests[j]),
            "input_tokens": int(inputs[j]),
            "hit_tokens": int(hit_sums[j]),
            "prefill_tokens": int(prefill_sums[j]),
            "hit_rate": int(hit_sums[j]) / int(inputs[j]) if inputs[j] else 0.0,
        }
        for j in range(n)
    ]
    input_tokens, hit_total = int(input_len.sum()), int(hit_tokens.sum())
    return {
        "capacity": text,
        "capacity_blocks": blocks,
        "hit_rate": hit_total / input_tokens if input_tokens else 0.0,
        "hit_tokens": hit_total,
        "input_tokens": input_tokens,
        "imbalance": imbalance(prefill, replica, timestamp, n, options.window_ns),
        "replicas": per,
    }


def _at_capacity(
    text: str,
    slot: CapacitySlot,
    lanes: Sequence[LaneFacts],
    pool: LaneFacts,
    replica: Int64Array,
    options: RoutesOptions,
) -> dict[str, Any]:
    block_size, block_bytes = _block_shape(lanes)
    blocks = slot.blocks(block_bytes, block_size)
    hits = project_batch(pool.segs, pool.seg_offsets, [blocks])[:, 0].astype(np.int64)
    return capacity_entry(text, blocks, pool.input_len, hits * pool.block_size, replica, pool.timestamp, options)


def _curve(pool: LaneFacts) -> dict[str, Any]:
    """Columns: capacity_blocks[i] (increasing, from 0) and hit_tokens[i], the aggregate hit
    tokens from there on (exact integers; the rate is hit_tokens / input_tokens)."""
    capacities, hit_blocks = lane_breakpoints(pool)
    block_size, _ = _block_shape([pool])
    tokens = hit_blocks.astype(np.int64) * block_size
    return {"input_tokens": pool.input_tokens, "capacity_blocks": capacities.tolist(), "hit_tokens": tokens.tolist()}


def routes_document(
    options: RoutesOptions,
    lanes: Mapping[Router, Sequence[LaneFacts]],
    facts: Mapping[Router, Path],
    simulated: Mapping[Router, list[dict[str, Any]]],
    *,
    chained: bool = False,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """routes.json from the state-free routers' replica lanes (the rows of their facts files
    `facts`; lanes[router][j] is replica j) and the simulations' capacity entries (least_loaded,
    cache_aware), in the order asked."""
    slots = [parse_capacity(text, f"capacities[{i}]") for i, text in enumerate(options.capacities)]
    routers: list[dict[str, Any]] = []
    for router in options.routers:
        if router in simulated:
            routers.append({"router": router.value, "facts": None, "capacities": simulated[router], "curve": None})
            continue
        pool, replica = _pooled(lanes[router])
        routers.append(
            {
                "router": router.value,
                "facts": facts[router].name,
                "capacities": [
                    _at_capacity(text, slot, lanes[router], pool, replica, options)
                    for text, slot in zip(options.capacities, slots, strict=True)
                ],
                "curve": _curve(pool),
            }
        )
    base = next((r for r in routers if r["router"] == Router.ROUND_ROBIN), None)
    for entry in routers:
        for i, at in enumerate(entry["capacities"]):
            at["vs_round_robin"] = None if base is None else at["hit_rate"] - base["capacities"][i]["hit_rate"]
    session_note = []
    if Router.SESSION in options.routers:
        session_note = [
            "session: qwen_bailian sessions follow parent_chat_id to their root chat_id"
            if chained
            else "session: this format carries no session ids; a request's session is its first trace key"
        ]
    return {
        "replicas": options.replicas,
        "options": options.model_dump(mode="json"),
        "routers": routers,
        "definitions": DEFINITIONS,
        "notes": [*notes, *session_note],
    }
