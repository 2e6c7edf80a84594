"""``tiers.json``: the tier split of every lane of a facts file at one configuration, with the
prefill estimate when a model and a GPU are given, and per request category when the trace is
known. The CLI (``litehit tiers``) and the tiers job build it with the same function.

Keys (users and tests rely on them)::

    {"mode", "tiers": [{"name", "capacity", "capacity_bytes"}], "constants": {...},
     "lanes": [{"lane", "requests", "input_tokens", "hit_rate", "block_size", "block_bytes", "hybrid",
                "tiers": [{"name", "capacity_blocks", "hit_blocks", "hit_tokens", "hit_rate",
                           "cumulative_hit_rate", "bytes_loaded"}],
                "prefill_s": {"mean", "p50", "p90", "p99", "uncached_mean", ...},   # with a model
                "categories": {name: {"requests", "input_tokens", "hit_rate", "tiers", "prefill_s"}}}],
     "notes": [...]}

Lanes are never summed: each has its own block size and bytes. ``capacity_blocks`` is null for
an infinite tier and for a lane whose rows differ in block size (each row converts on its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from litehit.capacity import CapacitySlot
from litehit.tiers.config import TierMode, parse_capacity
from litehit.tiers.hardware import spare_hbm_bytes
from litehit.tiers.lanes import LaneFacts
from litehit.tiers.options import SPARE, PrefillOptions, Tier, TiersOptions
from litehit.tiers.prefill import PrefillModel, prefill_model, prefill_stats
from litehit.tiers.split import LaneSplit, capacity_blocks_of, check_inclusive, split_lane

__all__ = ["LaneCategories", "Resolved", "resolve", "tiers_document"]

HYBRID_NOTE = (
    "hybrid lanes (byte-step facts): tiers are total bytes shared by Full blocks and Linear states; a tier is credited "
    "with the blocks that become restorable when it is added, and its bytes_loaded counts their Full blocks only "
    "(the facts do not carry a state's bytes)"
)
CONTRACT_NOTE = (
    "rows that broke the prefix contract (a key repeated in a request, or one key under two prefixes) carry the monotone defense's "
    "thresholds: their split is a lower bound"
)


@dataclass(frozen=True)
class LaneCategories:
    """The request category of every row of each lane (by instance id), in row order."""

    names: list[str]
    ids: Mapping[str, npt.NDArray[np.int32]]


@dataclass(frozen=True)
class Resolved:
    names: list[str]
    capacities: list[CapacitySlot]
    given: list[str]  # each capacity as written
    prefill: PrefillModel | None
    constants: dict[str, Any]


def resolve_capacity(tier: Tier, where: str, prefill: PrefillOptions | None) -> tuple[CapacitySlot, dict[str, Any]]:
    """A tier's capacity; ``spare`` becomes the exact bytes the weights leave (in the constants)."""
    if isinstance(tier.capacity, str) and tier.capacity.strip().lower() == SPARE:
        assert prefill is not None  # the options' validation holds it
        spare = spare_hbm_bytes(prefill.model, prefill.gpu, prefill.gpu_memory_utilization)
        constant = {
            "spare_bytes": spare,
            "rule": "GPU memory x gpu_memory_utilization - total parameters x 2 B (bf16 weights)",
            "gpu_memory_utilization": prefill.gpu_memory_utilization,
        }
        return parse_capacity(f"{spare}B", where), {tier.name: constant}
    return parse_capacity(tier.capacity, where), {}


def model_of(options: PrefillOptions | None, tiers: Sequence[Tier]) -> PrefillModel | None:
    if options is None:
        return None
    return prefill_model(
        options.model,
        options.gpu,
        [t.name for t in tiers],
        mfu=options.mfu,
        overlap=options.overlap,
        links={t.name: t.link for t in tiers if t.link},
        bandwidths={t.name: t.bandwidth_bytes_per_s for t in tiers if t.bandwidth_bytes_per_s is not None},
        latencies={t.name: t.latency_s for t in tiers if t.latency_s is not None},
        overrides=options.overrides(),
        where="prefill",
    )


def resolve(options: TiersOptions) -> Resolved:
    capacities, spare = [], {}
    for i, tier in enumerate(options.tiers):
        slot, constant = resolve_capacity(tier, f"tiers[{i}].capacity", options.prefill)
        capacities.append(slot)
        spare.update(constant)
    model = model_of(options.prefill, options.tiers)
    constants: dict[str, Any] = model.constants([t.name for t in options.tiers]) if model is not None else {}
    if spare:
        constants["spare"] = spare
    return Resolved(
        [t.name for t in options.tiers], capacities, [str(t.capacity) for t in options.tiers], model, constants
    )


def _rate(tokens: int, input_tokens: int) -> float:
    return tokens / input_tokens if input_tokens else 0.0


def _tier_rows(
    lane: LaneFacts,
    resolved: Resolved,
    blocks: npt.NDArray[np.int64],
    tokens: npt.NDArray[np.int64],
    loaded: npt.NDArray[np.int64],
    input_tokens: int,
) -> list[dict[str, Any]]:
    cumulative = np.cumsum(tokens)
    return [
        {
            "name": name,
            "capacity_blocks": capacity_blocks_of(lane, slot),
            "hit_blocks": int(blocks[i]),
            "hit_tokens": int(tokens[i]),
            "hit_rate": _rate(int(tokens[i]), input_tokens),
            "cumulative_hit_rate": _rate(int(cumulative[i]), input_tokens),
            "bytes_loaded": int(loaded[i]),
        }
        for i, (name, slot) in enumerate(zip(resolved.names, resolved.capacities, strict=True))
    ]


def _prefill(split: LaneSplit, rows: npt.NDArray[np.bool_] | None, duration_s: float) -> dict[str, Any] | None:
    if split.estimate_s is None or split.uncached_s is None:
        return None
    est, unc = split.estimate_s[0], split.uncached_s
    if rows is not None:
        est, unc = est[rows], unc[rows]
    return prefill_stats(est, unc, duration_s).as_dict()


def lane_document(
    lane: LaneFacts, resolved: Resolved, mode: TierMode, categories: LaneCategories | None
) -> dict[str, Any]:
    cats = categories.ids.get(lane.instance_id) if categories is not None else None
    names = categories.names if categories is not None and cats is not None else []
    split = split_lane(
        lane, [resolved.capacities], mode, prefill=resolved.prefill, categories=cats, n_categories=len(names)
    )
    uniform = lane.uniform()
    input_tokens = lane.input_tokens
    doc: dict[str, Any] = {
        "lane": lane.instance_id,
        "requests": lane.requests,
        "input_tokens": input_tokens,
        "hit_rate": _rate(int(split.hit_tokens[0].sum()), input_tokens),
        "block_size": uniform[0] if uniform else None,
        "block_bytes": uniform[1] if uniform else None,
        "hybrid": lane.hybrid,
        "tiers": _tier_rows(
            lane, resolved, split.hit_blocks[0], split.hit_tokens[0], split.bytes_loaded[0], input_tokens
        ),
    }
    prefill = _prefill(split, None, lane.duration_s())
    if prefill is not None:
        doc["prefill_s"] = prefill
    per_category: dict[str, Any] = {}
    if cats is not None:
        for g, name in enumerate(names):
            if split.category_requests[g] == 0:
                continue
            cat_tokens = int(split.category_input_tokens[g])
            entry: dict[str, Any] = {
                "requests": int(split.category_requests[g]),
                "input_tokens": cat_tokens,
                "hit_rate": _rate(int(split.category_hit_tokens[0, g].sum()), cat_tokens),
                "tiers": _tier_rows(
                    lane,
                    resolved,
                    split.category_hit_blocks[0, g],
                    split.category_hit_tokens[0, g],
                    split.category_bytes_loaded[0, g],
                    cat_tokens,
                ),
            }
            cat_prefill = _prefill(split, cats == g, lane.duration_s())
            if cat_prefill is not None:
                entry["prefill_s"] = cat_prefill
            per_category[name] = entry
    doc["categories"] = per_category
    return doc


def tiers_document(
    lanes: Sequence[LaneFacts],
    options: TiersOptions,
    *,
    categories: LaneCategories | None = None,
    notes: Sequence[str] = (),
    prefix_contract: bool = False,
) -> dict[str, Any]:
    """The tier split of every lane (TierError naming the tier on capacities an inclusive
    configuration cannot have). prefix_contract: the facts are known to keep the prefix contract
    (their replay chained every lane's keys), so no row can be a lower bound."""
    resolved = resolve(options)
    if options.mode is TierMode.INCLUSIVE:
        for lane in lanes:
            check_inclusive(lane, resolved.capacities, resolved.names, "tiers")
    return {
        "mode": options.mode.value,
        "tiers": [
            {
                "name": name,
                "capacity": given,
                "capacity_bytes": None if slot.per_lane or slot.infinite else slot.capacity_bytes,
            }
            for name, given, slot in zip(resolved.names, resolved.given, resolved.capacities, strict=True)
        ],
        "constants": resolved.constants,
        "lanes": [lane_document(lane, resolved, options.mode, categories) for lane in lanes],
        "notes": [
            *notes,
            *([] if prefix_contract else [CONTRACT_NOTE]),
            *([HYBRID_NOTE] if any(lane.hybrid for lane in lanes) else []),
        ],
    }
