"""The tier split: per request, the blocks each tier serves, exactly, from the facts alone.

Under LRU a block's tier is decided by its depth in the one recency order (decision 8):

- exclusive (demote on evict, promote on hit): the tiers together are one LRU of C1 + ... + Ck
  blocks, and a block at depth d sits in the first tier whose cumulative capacity reaches d, so
  tiers 1..i serve hit_blocks(C1 + ... + Ci);
- inclusive (every tier an LRU over all accesses, C1 <= ... <= Ck): tiers 1..i serve
  hit_blocks(Ci), since a smaller LRU holds a subset of a larger one.

Tier i serves the difference of consecutive values. The projector (core_c.project.project_tiers)
does every capacity -> hits step; each tier's capacity becomes whole blocks in each row's lane.
Rows that broke the prefix contract carry the monotone defense's thresholds: their split is a
lower bound (never optimistic), as every projection of them is.

A hybrid lane (byte-step facts) has one byte budget for its Full blocks and Linear states, so its
tiers are total bytes: exclusive, tiers 1..i are one byte LRU of C1 + ... + Ci bytes and serve the
blocks restorable within it, ProjectBytes(fact, C1 + ... + Ci); inclusive, ProjectBytes(fact, Ci).
Tier i is credited with the blocks that become restorable when it is added (a restore needs the
prefix's Full blocks and a state, wherever each sits), and its bytes_loaded counts those Full
blocks only: the facts do not carry a state's bytes. Block or token capacities are refused there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core_c.hybrid import HybridFacts, project_steps_batch
from core_c.project import project_tiers, tiers_sums
from litehit.capacity import CapacitySlot
from litehit.query import slot_arrays
from litehit.tiers.config import TierError, TierMode
from litehit.tiers.lanes import LaneFacts
from litehit.tiers.prefill import PrefillModel

__all__ = ["LaneSplit", "capacity_blocks_of", "check_inclusive", "served_blocks", "split_lane"]

Config = Sequence[CapacitySlot]
STEP_NUMBERS = 1 << 21  # rows x configurations x tiers projected at once (16 MiB of uint64)


def capacity_blocks_of(lane: LaneFacts, slot: CapacitySlot) -> int | None:
    """The tier's capacity in the lane's blocks; None when infinite or when the lane's rows differ
    in block size or bytes (each row then converts on its own)."""
    uniform = lane.uniform()
    if uniform is None or slot.infinite or lane.hybrid:
        return None
    block_size, block_bytes = uniform
    return slot.blocks(block_bytes, block_size)


def check_inclusive(lane: LaneFacts, config: Config, names: Sequence[str], where: str) -> None:
    """Inclusive capacities must not decrease, in every (block size, block bytes) of the lane."""
    if lane.requests == 0:
        return
    pairs = np.unique(np.stack([lane.block_size, lane.block_bytes], axis=1), axis=0)
    for bs, bb in pairs.tolist():
        blocks = [None if s.infinite else s.blocks(int(bb), int(bs)) for s in config]
        for i in range(1, len(blocks)):
            low, high = blocks[i - 1], blocks[i]
            if (low is None and high is not None) or (low is not None and high is not None and high < low):
                raise TierError(
                    f"{where}[{i}].capacity",
                    f"inclusive tiers need non-decreasing capacities: {names[i]} ({config[i].label}) is smaller "
                    f"than {names[i - 1]} ({config[i - 1].label}) in lane {lane.instance_id}",
                )


def _tier_arrays(configs: Sequence[Config]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint8]]:
    values, kinds = zip(*(slot_arrays(config) for config in configs), strict=True)
    return np.concatenate(values), np.concatenate(kinds)


def _byte_capacities(lane: LaneFacts, config: Config, mode: TierMode) -> list[int | None]:
    """A hybrid lane's tiers 1..i as total bytes (None: infinite): exclusive, the sums of the
    capacities down to tier i; inclusive, tier i's own. TierError for blocks or tokens."""
    out: list[int | None] = []
    total: int | None = 0
    for i, slot in enumerate(config):
        if slot.per_lane:
            raise TierError(
                f"tiers[{i}].capacity",
                f"lane {lane.instance_id} is hybrid (byte-step facts): its Full blocks and Linear states share one byte "
                f"budget, so give tier capacities in bytes (16GiB, 512MiB, inf), not {slot.label}",
            )
        size = None if slot.infinite else slot.capacity_bytes
        if mode is TierMode.INCLUSIVE:
            out.append(size)
            continue
        total = None if total is None or size is None else min(total + size, (1 << 64) - 1)
        out.append(total)
    return out


def _step_served(lane: LaneFacts, configs: Sequence[Config], mode: TierMode, lo: int, hi: int) -> npt.NDArray[np.int64]:
    """(rows lo..hi, configurations, tiers): the blocks tiers 1..i restore, of a hybrid lane."""
    caps = [c for config in configs for c in _byte_capacities(lane, config, mode)]
    seg_lo, seg_hi = int(lane.seg_offsets[lo]), int(lane.seg_offsets[hi])
    facts = HybridFacts(lane.segs[seg_lo:seg_hi].view(np.uint64), lane.seg_offsets[lo : hi + 1] - seg_lo)
    served = project_steps_batch(facts, caps).astype(np.int64)
    return served.reshape(hi - lo, len(configs), len(configs[0]))


def _step_sums(
    lane: LaneFacts,
    configs: Sequence[Config],
    mode: TierMode,
    lo: int,
    hi: int,
    cats: npt.NDArray[np.int32],
    n_cat: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """tiers_sums for a hybrid lane's rows lo..hi: blocks, tokens and bytes loaded (configurations,
    categories, tiers) of what each tier alone served, and those blocks per request."""
    alone = np.diff(_step_served(lane, configs, mode, lo, hi), axis=2, prepend=0)
    tokens = alone * lane.block_size[lo:hi, None, None]
    loaded = alone * lane.block_bytes[lo:hi, None, None]
    loaded[:, :, 0] = 0  # the first tier is the GPU's own memory
    sums = []
    for values in (alone, tokens, loaded):
        out = np.zeros((n_cat, *values.shape[1:]), np.int64)
        np.add.at(out, cats[lo:hi], values)
        sums.append(out.transpose(1, 0, 2))
    return sums[0], sums[1], sums[2], alone


def _rows_of(
    lane: LaneFacts, lo: int, hi: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Requests lo..hi of a lane as the C projectors take them: their segments, segment offsets
    (from 0), block sizes and block bytes."""
    seg_lo, seg_hi = int(lane.seg_offsets[lo]), int(lane.seg_offsets[hi])
    return (
        lane.segs[seg_lo:seg_hi],
        lane.seg_offsets[lo : hi + 1] - seg_lo,
        lane.block_size[lo:hi],
        lane.block_bytes[lo:hi],
    )


def served_blocks(lane: LaneFacts, configs: Sequence[Config], mode: TierMode, rows: slice) -> npt.NDArray[np.uint64]:
    """(rows, configurations, tiers): the hit blocks served by tiers 1..i of each request."""
    if lane.hybrid:
        return _step_served(lane, configs, mode, rows.start, min(rows.stop, lane.requests)).astype(np.uint64)
    values, kinds = _tier_arrays(configs)
    lo, hi = rows.start, min(rows.stop, lane.requests)
    return project_tiers(
        *_rows_of(lane, lo, hi),
        values,
        kinds,
        len(configs[0]),
        inclusive=mode is TierMode.INCLUSIVE,
    )


@dataclass
class LaneSplit:
    """Sums of one lane at each configuration c and tier i (and per category g)."""

    hit_blocks: npt.NDArray[np.int64]  # (configs, tiers): blocks tier i served
    hit_tokens: npt.NDArray[np.int64]
    bytes_loaded: npt.NDArray[np.int64]
    category_requests: npt.NDArray[np.int64]  # (categories,)
    category_input_tokens: npt.NDArray[np.int64]
    category_hit_blocks: npt.NDArray[np.int64]  # (configs, categories, tiers)
    category_hit_tokens: npt.NDArray[np.int64]
    category_bytes_loaded: npt.NDArray[np.int64]
    estimate_s: npt.NDArray[np.float64] | None  # (configs, requests) with a prefill model
    uncached_s: npt.NDArray[np.float64] | None  # (requests,)


def _sum_by(groups: npt.NDArray[np.int32], values: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.int64]:
    """Integer sums of values per group, exactly (no float weights)."""
    out = np.zeros(n, np.int64)
    np.add.at(out, groups, values)
    return out


def split_lane(
    lane: LaneFacts,
    configs: Sequence[Config],
    mode: TierMode,
    *,
    prefill: PrefillModel | None = None,
    categories: npt.NDArray[np.int32] | None = None,
    n_categories: int = 0,
) -> LaneSplit:
    """The tier split of one lane at every configuration (each a capacity per tier): the sums in
    C (core_c.project.tiers_sums); with a prefill model, each request's estimate too."""
    n_cfg, n_tiers, n = len(configs), len(configs[0]), lane.requests
    cats = categories if categories is not None else np.zeros(n, np.int32)
    n_cat = max(n_categories, 1 if categories is None else int(cats.max(initial=-1)) + 1, 1)
    values, kinds = _tier_arrays(configs)
    estimate = np.zeros((n_cfg, n), np.float64) if prefill is not None else None
    sums = [np.zeros((n_cfg, n_cat, n_tiers), np.int64) for _ in range(3)]
    # per-request arrays (a prefill model's, or a hybrid lane's projections) are bounded by chunks of rows
    step = max(64, STEP_NUMBERS // (n_cfg * n_tiers)) if prefill is not None or lane.hybrid else max(n, 1)
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        blocks, tokens, loaded, tier_hits = (
            _step_sums(lane, configs, mode, lo, hi, cats, n_cat)
            if lane.hybrid
            else tiers_sums(
                *_rows_of(lane, lo, hi),
                values,
                kinds,
                n_tiers,
                inclusive=mode is TierMode.INCLUSIVE,
                category=None if categories is None else cats[lo:hi],
                n_categories=n_cat,
                per_request=prefill is not None,
            )
        )
        for total, part in zip(sums, (blocks, tokens, loaded), strict=True):
            total += part.astype(np.int64)
        if prefill is not None and estimate is not None and tier_hits is not None:
            estimate[:, lo:hi] = prefill.estimate_s(
                lane.input_len[lo:hi], lane.block_size[lo:hi], lane.block_bytes[lo:hi], tier_hits.astype(np.int64)
            ).T
    return LaneSplit(
        hit_blocks=sums[0].sum(axis=1),
        hit_tokens=sums[1].sum(axis=1),
        bytes_loaded=sums[2].sum(axis=1),
        category_requests=np.bincount(cats, minlength=n_cat).astype(np.int64),
        category_input_tokens=_sum_by(cats, lane.input_len, n_cat),
        category_hit_blocks=sums[0],
        category_hit_tokens=sums[1],
        category_bytes_loaded=sums[2],
        estimate_s=estimate,
        uncached_s=prefill.uncached_s(lane.input_len) if prefill is not None else None,
    )
