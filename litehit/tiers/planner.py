"""The tier planner: the cheapest configuration reaching a target, and the Pareto frontier of cost
against hit rate (and the prefill estimate), per lane, from the facts alone.

Search (``searched`` in plan.json says which was done):

- A lane's hit rate changes only at its curve's breakpoints (the distinct thresholds of its
  facts). Exclusive tiers hit by their total capacity S = B1 + ... + Bk; inclusive ones by the
  last tier's Bk. For a hit-rate target the smallest breakpoint S reaching it is exact, and the
  cheapest configuration holding S starts every tier at its minimum and fills the cheapest tiers
  per block first (ties: the faster, upper tier) up to their maximum: the exact optimum, since
  cost is linear in the capacities. Tiers that cost nothing are also tried at their maximum (the
  same cost, more capacity).
- The frontier and the time targets evaluate candidates exactly (every request projected): that
  cheapest fill at the breakpoint reaching each of 200 evenly spaced shares of the lane's
  plateau (0.5%, 1%, ... 100%) and at each tier's bounds, plus, with a prefill model, a ladder
  of every ranged tier (its minimum, maximum and min + (max - min) / 2^j for j = 1..L, L = 10 for
  one ranged tier, 5 for two, 3 for three, 2 beyond) in every combination. A time target's
  optimum is the cheapest candidate meeting it: exact among those, not over every allocation
  (the prefill estimate is not monotone in the capacities: a slow tier can cost more than it
  saves).

An infinite maximum is searched up to the lane's plateau (more capacity changes nothing).

A lane's capacities are counted in units: its blocks, or bytes for a hybrid lane (byte-step
facts: Full blocks and Linear states share one byte budget, so its breakpoints, tier bounds and
configurations are total bytes and its tiers have no block count).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from litehit.capacity import GIB, CapacitySlot, format_bytes
from litehit.quantiles import decimal
from litehit.tiers.config import TierError, TierMode, parse_range
from litehit.tiers.document import model_of, resolve_capacity
from litehit.tiers.lanes import LaneFacts
from litehit.tiers.options import SPARE, PlanOptions, PlanTier
from litehit.tiers.prefill import PrefillModel, prefill_stats
from litehit.tiers.split import split_lane

__all__ = ["HIT_RATE_LEVELS", "lane_breakpoints", "plan_document"]

HIT_RATE_LEVELS = 200
LADDER_STEPS = {1: 10, 2: 5, 3: 3}
LADDER_STEPS_BEYOND = 2


@dataclass(frozen=True)
class Bounds:
    """A plan tier in one lane's units (blocks, or bytes for a hybrid lane)."""

    name: str
    low: int
    high: int  # the lane's plateau capacity when the range's end is infinite
    price_per_block_hour: Fraction  # per unit


def _step_breakpoints(lane: LaneFacts) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """lane_breakpoints of a hybrid lane, in bytes: each point adds its increase of hit blocks
    at its threshold."""
    points = lane.segs
    hits = points[:, 1]
    incs = np.diff(hits, prepend=np.int64(0))
    firsts = lane.seg_offsets[:-1][np.diff(lane.seg_offsets) > 0]
    incs[firsts] = hits[firsts]
    caps, at = np.unique(points[:, 0].view(np.uint64), return_inverse=True)
    if len(caps) and int(caps[-1]) > np.iinfo(np.int64).max:
        raise TierError(
            "facts", f"lane {lane.instance_id} has byte thresholds beyond 2^63 - 1: a plan cannot hold them"
        )
    sums = np.zeros(len(caps), np.int64)
    np.add.at(sums, at, incs)
    return np.concatenate([[0], caps.astype(np.int64)]), np.concatenate([[0], np.cumsum(sums)]).astype(np.int64)


def lane_breakpoints(lane: LaneFacts) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(capacities, hit_blocks): hit_blocks[j] blocks hit at capacity capacities[j] units (blocks;
    bytes for a hybrid lane) and until the next breakpoint; capacities[0] == 0 (0 hits). The last
    is the plateau."""
    segs = lane.segs
    if len(segs) == 0:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    if lane.hybrid:
        return _step_breakpoints(lane)
    ends = segs[:, 0] + segs[:, 1]
    size = int(ends.max()) + 1
    slope = np.cumsum(np.bincount(segs[:, 0], minlength=size) - np.bincount(ends, minlength=size))
    per_threshold = slope  # thresholds equal to C: how many blocks need exactly C
    thresholds = np.nonzero(per_threshold)[0].astype(np.int64)
    hits = np.cumsum(per_threshold[thresholds]).astype(np.int64)
    return np.concatenate([[0], thresholds]), np.concatenate([[0], hits])


def _units(lane: LaneFacts, slot: CapacitySlot, tier: str) -> int | None:
    """A capacity in the lane's units (None: infinite)."""
    uniform = lane.uniform()
    assert uniform is not None
    block_size, block_bytes = uniform
    if not lane.hybrid:
        return slot.blocks(block_bytes, block_size)
    if slot.per_lane:
        raise TierError(
            f"--tier {tier}",
            f"lane {lane.instance_id} is hybrid (byte-step facts): its Full blocks and Linear states share one byte "
            f"budget, so give tier capacities in bytes (16GiB, 0..2TiB), not {slot.label}",
        )
    return None if slot.infinite else min(slot.capacity_bytes, np.iinfo(np.int64).max)


def _bounds(
    lane: LaneFacts, tiers: Sequence[PlanTier], slots: Sequence[tuple[CapacitySlot, CapacitySlot]], plateau: int
) -> list[Bounds]:
    uniform = lane.uniform()
    if uniform is None:
        raise TierError(
            "facts", f"lane {lane.instance_id} mixes block sizes or bytes: a plan needs one block size per lane"
        )
    unit_bytes = 1 if lane.hybrid else uniform[1]
    out = []
    for tier, (low, high) in zip(tiers, slots, strict=True):
        lo = _units(lane, low, tier.name) or 0
        hi_units = _units(lane, high, tier.name)
        hi = plateau if hi_units is None else hi_units
        if hi < lo:
            raise TierError(f"--tier {tier.name}", f"range ends ({high.label}) below its start ({low.label})")
        price = Fraction(repr(tier.price_per_gib_hour)) * unit_bytes / GIB
        out.append(Bounds(tier.name, lo, hi if hi_units is not None else max(hi, lo), price))
    return out


def _cheapest(bounds: Sequence[Bounds], total: int, mode: TierMode) -> tuple[int, ...] | None:
    """The cheapest capacities holding `total` blocks (exclusive: their sum; inclusive: the last),
    None when the bounds cannot."""
    lows = [b.low for b in bounds]
    if mode is TierMode.INCLUSIVE:
        caps = list(itertools.accumulate(lows, max))
        caps[-1] = max(caps[-1], total)
        if any(c > b.high for c, b in zip(caps, bounds, strict=True)):
            return None
        return tuple(caps)
    need = total - sum(lows)
    caps = list(lows)
    if need > 0:
        for i in sorted(range(len(bounds)), key=lambda i: (bounds[i].price_per_block_hour, i)):
            add = min(need, bounds[i].high - caps[i])
            caps[i] += add
            need -= add
            if need == 0:
                break
        if need > 0:
            return None
    return tuple(caps)


def _with_free_tiers_full(bounds: Sequence[Bounds], caps: tuple[int, ...], mode: TierMode) -> tuple[int, ...] | None:
    """caps with every tier that costs nothing at its maximum (None: nothing changes, or an
    inclusive configuration would decrease)."""
    full = tuple(b.high if b.price_per_block_hour == 0 else c for b, c in zip(bounds, caps, strict=True))
    if full == caps or (mode is TierMode.INCLUSIVE and any(a > b for a, b in itertools.pairwise(full))):
        return None
    return full


def _ladder(b: Bounds, steps: int) -> list[int]:
    span = b.high - b.low
    return sorted({b.low, b.high, *(b.low + span // (1 << j) for j in range(1, steps + 1))})


@dataclass
class Candidate:
    caps: tuple[int, ...]
    cost_per_hour: float
    hit_rate: float
    hit_tokens: int
    prefill: dict[str, Any] | None = None


def _evaluate(
    lane: LaneFacts,
    bounds: Sequence[Bounds],
    caps_list: list[tuple[int, ...]],
    mode: TierMode,
    model: PrefillModel | None,
) -> list[Candidate]:
    if lane.hybrid:
        configs = [[CapacitySlot(c / GIB, "bytes", c) for c in caps] for caps in caps_list]
    else:
        configs = [[CapacitySlot(None, "blocks", c) for c in caps] for caps in caps_list]
    split = split_lane(lane, configs, mode, prefill=model)
    out = []
    input_tokens = lane.input_tokens
    for c, caps in enumerate(caps_list):
        tokens = int(split.hit_tokens[c].sum())
        cost = float(sum(Fraction(k) * b.price_per_block_hour for k, b in zip(caps, bounds, strict=True)))
        prefill = None
        if model is not None and split.estimate_s is not None and split.uncached_s is not None:
            prefill = prefill_stats(split.estimate_s[c], split.uncached_s, lane.duration_s()).as_dict()
        out.append(Candidate(caps, cost, tokens / input_tokens if input_tokens else 0.0, tokens, prefill))
    return out


def _frontier(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Not dominated on (cost, hit rate, mean estimate): nobody is at most as costly, at least as
    hitting and at most as slow, and better in one."""

    def key(c: Candidate) -> tuple[float, float, float]:
        return (c.cost_per_hour, -c.hit_rate, c.prefill["mean"] if c.prefill else 0.0)

    unique = {c.caps: c for c in candidates}.values()
    ordered = sorted(unique, key=key)
    kept: list[Candidate] = []
    for c in ordered:
        kc = key(c)
        if any(all(a <= b for a, b in zip(key(k), kc, strict=True)) and key(k) != kc for k in kept):
            continue
        if any(key(k) == kc for k in kept):
            continue
        kept.append(c)
    return kept


def _config(
    c: Candidate, bounds: Sequence[Bounds], block_bytes: int, gpu_price: float | None, hybrid: bool = False
) -> dict[str, Any]:
    """A candidate as plan.json shows it; a hybrid lane's capacities are bytes (no block count)."""
    unit = 1 if hybrid else block_bytes
    out: dict[str, Any] = {
        "tiers": [
            {
                "name": b.name,
                "capacity_blocks": None if hybrid else k,
                "capacity": format_bytes(k * unit),
                "capacity_bytes": k * unit,
            }
            for b, k in zip(bounds, c.caps, strict=True)
        ],
        "total_capacity_blocks": None if hybrid else sum(c.caps),
        "cost_per_hour": c.cost_per_hour,
        "hit_rate": c.hit_rate,
        "prefill_s": c.prefill,
    }
    if gpu_price is not None and c.prefill is not None:
        saved = c.prefill["uncached_gpu_s_per_hour"], c.prefill["gpu_s_per_hour"]
        if None not in saved:
            gpu_hours = (saved[0] - saved[1]) / 3600.0
            out["gpu_hours_saved_per_hour"] = gpu_hours
            out["value_per_hour"] = gpu_hours * gpu_price
            out["net_per_hour"] = gpu_hours * gpu_price - c.cost_per_hour
    return out


def _meets(c: Candidate, options: PlanOptions, need_tokens: int | None) -> bool:
    t = options.target
    if t.hit_rate is not None:
        return need_tokens is not None and c.hit_tokens >= need_tokens
    if c.prefill is None:
        return False
    if t.prefill_saving is not None:
        share = c.prefill["saved_share"]
        return share is not None and share >= t.prefill_saving
    if t.ttft_s is not None:
        return bool(c.prefill[options.ttft_stat] <= t.ttft_s)
    return False


def plan_lane(
    lane: LaneFacts,
    options: PlanOptions,
    slots: Sequence[tuple[CapacitySlot, CapacitySlot]],
    model: PrefillModel | None,
) -> dict[str, Any]:
    capacities, hits = lane_breakpoints(lane)
    plateau = int(capacities[-1])
    bounds = _bounds(lane, options.tiers, slots, plateau)
    uniform = lane.uniform()
    assert uniform is not None
    block_size, block_bytes = uniform
    mode = options.mode
    # the totals worth holding: each share of the plateau, and the bounds
    totals: set[int] = set()
    plateau_hits = int(hits[-1])
    for level in range(1, HIT_RATE_LEVELS + 1):
        need = -(-plateau_hits * level // HIT_RATE_LEVELS)
        totals.add(int(capacities[int(np.searchsorted(hits, need, side="left"))]))
    low_total = sum(b.low for b in bounds) if mode is TierMode.EXCLUSIVE else max(b.low for b in bounds)
    high_total = sum(b.high for b in bounds) if mode is TierMode.EXCLUSIVE else bounds[-1].high
    totals |= {low_total, min(high_total, plateau)}
    need_tokens: int | None = None
    exact_total: int | None = None
    if options.target.hit_rate is not None:
        frac = decimal(options.target.hit_rate)
        need_tokens = -(-lane.input_tokens * frac.numerator // frac.denominator)
        need_blocks = -(-need_tokens // block_size)
        j = int(np.searchsorted(hits, need_blocks, side="left"))
        if j < len(hits):
            exact_total = int(capacities[j])
            totals.add(exact_total)
    caps_set: set[tuple[int, ...]] = set()
    for t in totals:
        caps = _cheapest(bounds, max(t, low_total), mode)
        if caps is None:
            continue
        caps_set.add(caps)
        free = _with_free_tiers_full(bounds, caps, mode)  # free capacity at the same cost
        if free is not None:
            caps_set.add(free)
    ranged = [i for i, b in enumerate(bounds) if b.high > b.low]
    ladder_size = 0
    if model is not None and ranged:
        steps = LADDER_STEPS.get(len(ranged), LADDER_STEPS_BEYOND)
        ladders = [_ladder(bounds[i], steps) if i in ranged else [bounds[i].low] for i in range(len(bounds))]
        for caps in itertools.product(*ladders):
            if mode is TierMode.INCLUSIVE and any(a > b for a, b in itertools.pairwise(caps)):
                continue
            caps_set.add(tuple(caps))
            ladder_size += 1
    candidates = _evaluate(lane, bounds, sorted(caps_set), mode, model)
    frontier = _frontier(candidates)
    best: Candidate | None = None
    if options.target.given:
        meeting = [c for c in candidates if _meets(c, options, need_tokens)]
        if meeting:
            best = min(meeting, key=lambda c: (c.cost_per_hour, -c.hit_rate, c.caps))
    elif options.gpu_price_per_hour is not None:
        valued = [(_config(c, bounds, block_bytes, options.gpu_price_per_hour, lane.hybrid), c) for c in candidates]
        best = max(valued, key=lambda v: (v[0].get("net_per_hour", float("-inf")), -v[1].cost_per_hour))[1]
    unit = "bytes" if lane.hybrid else "blocks"
    searched = (
        f"{len(candidates)} configurations evaluated exactly: the cheapest fill at the breakpoint reaching each "
        f"of {HIT_RATE_LEVELS} shares of the plateau ({plateau:,} {unit}) and at the bounds"
    )
    if exact_total is not None:
        searched += f"; the hit-rate target exactly (smallest breakpoint reaching it: {exact_total:,} {unit})"
    if ladder_size:
        searched += f"; a ladder of {ladder_size} combinations of the ranged tiers (litehit.tiers.planner)"
    out: dict[str, Any] = {
        "best": None if best is None else _config(best, bounds, block_bytes, options.gpu_price_per_hour, lane.hybrid),
        "frontier": [_config(c, bounds, block_bytes, options.gpu_price_per_hour, lane.hybrid) for c in frontier],
        "searched": searched,
    }
    if options.target.given and best is None:
        reach = max(candidates, key=lambda c: c.hit_rate)
        out["unreachable"] = (
            f"no configuration within the bounds meets the target (the most capacity hits {reach.hit_rate:.4g})"
        )
    return out


def _slots(options: PlanOptions) -> tuple[list[tuple[CapacitySlot, CapacitySlot]], dict[str, Any]]:
    slots, spare = [], {}
    for i, tier in enumerate(options.tiers):
        where = f"tiers[{i}].capacity"
        if isinstance(tier.capacity, str) and tier.capacity.strip().lower() == SPARE:
            slot, constant = resolve_capacity(tier, where, options.prefill)
            spare.update(constant)
            slots.append((slot, slot))
        else:
            r = parse_range(tier.capacity, where)
            slots.append((r.low, r.high))
    return slots, spare


def plan_document(lanes: Sequence[LaneFacts], options: PlanOptions) -> dict[str, Any]:
    """plan.json: ``best``, ``frontier`` and ``searched`` at the top level for one lane, per lane
    under ``lanes`` for several; with the mode, target, prices and every constant used."""
    slots, spare = _slots(options)
    model = model_of(options.prefill, options.tiers)
    constants: dict[str, Any] = model.constants([t.name for t in options.tiers]) if model is not None else {}
    if spare:
        constants["spare"] = spare
    head: dict[str, Any] = {
        "mode": options.mode.value,
        "target": options.target.model_dump(exclude_none=True)
        | ({"ttft_stat": options.ttft_stat} if options.target.ttft_s else {}),
        "tiers": [
            {"name": t.name, "capacity": str(t.capacity), "price_per_gib_hour": t.price_per_gib_hour}
            for t in options.tiers
        ],
        "gpu_price_per_hour": options.gpu_price_per_hour,
        "constants": constants,
    }
    plans = [{"lane": lane.instance_id, **plan_lane(lane, options, slots, model)} for lane in lanes if lane.requests]
    if len(plans) == 1:
        return {**head, **{k: v for k, v in plans[0].items()}}
    return {**head, "lanes": plans}
