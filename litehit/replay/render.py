"""Rendering facts CSV rows of a chunk from the lanes' facts, in input order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core_c.scan import render_facts
from litehit.facts import EXTENDED_HEADER, FACTS_HEADER
from litehit.replay.lanes import LaneFacts
from litehit.replay.plan import ChunkPlan, ReplayPlan

__all__ = ["EXTENDED_HEADER", "FACTS_HEADER", "header_for", "render_chunk"]


def header_for(extended: bool) -> bytes:
    return EXTENDED_HEADER if extended else FACTS_HEADER


def render_chunk(plan: ReplayPlan, chunk: ChunkPlan, facts: Sequence[LaneFacts]) -> bytes:
    """The facts rows of one chunk (no header); facts[l] belongs to chunk.lanes[l]."""
    if len(chunk.out_src) == 0:
        return b""
    seg_counts = [len(f.segments) for f in facts]
    seg_base = np.concatenate([[0], np.cumsum(seg_counts)])[:-1]
    segments = np.concatenate([f.segments for f in facts]) if sum(seg_counts) else np.empty((0, 2), np.int64)
    lo = np.concatenate([base + f.seg_offsets[:-1] for base, f in zip(seg_base, facts, strict=True)])
    hi = np.concatenate([base + f.seg_offsets[1:] for base, f in zip(seg_base, facts, strict=True)])
    lens = np.concatenate([w.input_lens for w in chunk.lanes])
    request_base = np.concatenate([[0], np.cumsum([w.requests for w in chunk.lanes])])[:-1]
    idx = request_base[chunk.out_lane] + chunk.out_pos
    blocks = cuts = None
    if plan.extended:
        blocks = np.concatenate([np.diff(w.offsets) for w in chunk.lanes])[idx]
        cuts = np.concatenate([f.cuts for f in facts])[idx]
    return render_facts(
        ids=chunk.ids,
        id_offsets=chunk.id_offsets,
        timestamps=chunk.timestamps,
        lane_ids=plan.lane_ids,
        lane_id_offsets=plan.lane_id_offsets,
        lane_block_size=np.array([lane.block_size for lane in plan.lanes], dtype=np.int64),
        lane_block_bytes=np.array([lane.block_bytes for lane in plan.lanes], dtype=np.int64),
        out_src=chunk.out_src,
        out_lane=chunk.out_lane,
        input_lens=np.ascontiguousarray(lens[idx]),
        out_seg_lo=np.ascontiguousarray(lo[idx]),
        out_seg_hi=np.ascontiguousarray(hi[idx]),
        segments=segments,
        blocks=None if blocks is None else np.ascontiguousarray(blocks),
        cuts=None if cuts is None else np.ascontiguousarray(cuts),
        lane_steps=np.array([lane.hybrid for lane in plan.lanes], dtype=np.uint8)
        if any(lane.hybrid for lane in plan.lanes)
        else None,
    )
