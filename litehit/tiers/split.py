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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core_c.project import project_tiers
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
    if uniform is None or slot.infinite:
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


def served_blocks(lane: LaneFacts, configs: Sequence[Config], mode: TierMode, rows: slice) -> npt.NDArray[np.uint64]:
    """(rows, configurations, tiers): the hit blocks served by tiers 1..i of each request."""
    values, kinds = _tier_arrays(configs)
    lo, hi = rows.start, min(rows.stop, lane.requests)
    seg_lo, seg_hi = int(lane.seg_offsets[lo]), int(lane.seg_offsets[hi])
    return project_tiers(
        lane.segs[seg_lo:seg_hi],
        lane.seg_offsets[lo : hi + 1] - seg_lo,
        lane.block_size[lo:hi],
        lane.block_bytes[lo:hi],
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


def split_lane(
    lane: LaneFacts,
    configs: Sequence[Config],
    mode: TierMode,
    *,
    prefill: PrefillModel | None = None,
    categories: npt.NDArray[np.int32] | None = None,
    n_categories: int = 0,
) -> LaneSplit:
    """The tier split of one lane at every configuration (each a capacity per tier)."""
    n_cfg, n_tiers, n = len(configs), len(configs[0]), lane.requests
    cats = categories if categories is not None else np.zeros(n, np.int32)
    n_cat = max(n_categories, 1 if categories is None else int(cats.max(initial=-1)) + 1)
    out = LaneSplit(
        hit_blocks=np.zeros((n_cfg, n_tiers), np.int64),
        hit_tokens=np.zeros((n_cfg, n_tiers), np.int64),
        bytes_loaded=np.zeros((n_cfg, n_tiers), np.int64),
        category_requests=np.bincount(cats, minlength=n_cat).astype(np.int64),
        category_input_tokens=np.bincount(cats, weights=lane.input_len, minlength=n_cat).astype(np.int64),
        category_hit_blocks=np.zeros((n_cfg, n_cat, n_tiers), np.int64),
        category_hit_tokens=np.zeros((n_cfg, n_cat, n_tiers), np.int64),
        category_bytes_loaded=np.zeros((n_cfg, n_cat, n_tiers), np.int64),
        estimate_s=np.zeros((n_cfg, n), np.float64) if prefill is not None else None,
        uncached_s=prefill.uncached_s(lane.input_len) if prefill is not None else None,
    )
    step = max(64, STEP_NUMBERS // (n_cfg * n_tiers))
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        served = served_blocks(lane, configs, mode, slice(lo, hi))
        tier_hits = np.diff(served, axis=2, prepend=np.zeros((hi - lo, n_cfg, 1), np.uint64)).astype(np.int64)
        bs, bb, cat = lane.block_size[lo:hi], lane.block_bytes[lo:hi], cats[lo:hi]
        tokens = tier_hits * bs[:, None, None]
        loaded = tier_hits * bb[:, None, None]
        loaded[:, :, 0] = 0  # the first tier is the GPU's own memory: nothing is loaded
        out.hit_blocks += tier_hits.sum(axis=0)
        out.hit_tokens += tokens.sum(axis=0)
        out.bytes_loaded += loaded.sum(axis=0)
        if categories is not None:
            for c in range(n_cfg):
                for arr, into in (
                    (tier_hits, out.category_hit_blocks),
                    (tokens, out.category_hit_tokens),
                    (loaded, out.category_bytes_loaded),
                ):
                    np.add.at(into[c], cat, arr[:, c, :])
        if prefill is not None:
            assert out.estimate_s is not None
            out.estimate_s[:, lo:hi] = prefill.estimate_s(lane.input_len[lo:hi], bs, bb, tier_hits).T
    if categories is None:  # one category: the lane itself
        out.category_hit_blocks[:, 0, :] = out.hit_blocks
        out.category_hit_tokens[:, 0, :] = out.hit_tokens
        out.category_bytes_loaded[:, 0, :] = out.bytes_loaded
    return out
