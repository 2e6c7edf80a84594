"""A lane at run time: the C lane core of one configured instance (the hybrid core for a lane with
linear-attention states), fed LaneWork in order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import core_c
from litehit.replay.plan import LaneSpec, LaneWork
from litehit.replay.result import LaneStats

__all__ = ["LaneFacts", "LaneRunner", "LaneStats"]


@dataclass(frozen=True, slots=True)
class LaneFacts:
    """Facts of one LaneWork: request j's curve is segments[seg_offsets[j]:seg_offsets[j+1]]."""

    segments: npt.NDArray[np.int64]  # (m, 2): start_required_blocks, run_length
    seg_offsets: npt.NDArray[np.int64]
    cuts: npt.NDArray[np.uint8]


class LaneRunner:
    """Owns the C lane core of one lane. ``keep_expired`` makes cut reasons exact (extended facts)."""

    def __init__(self, spec: LaneSpec, *, keep_expired: bool = False) -> None:
        from core_c.hybrid import HybridLane

        self.spec = spec
        self.core: core_c.Lane | HybridLane
        if spec.hybrid:
            self.core = HybridLane(
                full_charge=spec.block_bytes,
                linear_charge=spec.linear_charge,
                step_blocks=spec.step_blocks,
                ttl_ns=spec.ttl_ns,
            )
        else:
            self.core = core_c.Lane(ttl_ns=spec.ttl_ns, keep_expired=keep_expired)
        self.requests = 0
        self.blocks = 0

    def run(self, work: LaneWork) -> LaneFacts:
        """The chunk's facts: the lane core's curves, or a hybrid lane's byte-step points (their
        thresholds as int64 bits; no cut reasons: extended facts are Full-only)."""
        if isinstance(self.core, core_c.Lane):
            facts = self.core.process_batch(work.keys, work.offsets, work.timestamps)
            out = LaneFacts(facts.segments, facts.seg_offsets, facts.cuts)
        else:
            steps = self.core.process_batch(work.keys, work.offsets, work.timestamps)
            out = LaneFacts(steps.points.view(np.int64), steps.point_offsets, np.zeros(work.requests, np.uint8))
        self.requests += work.requests
        self.blocks += len(work.keys)
        return out

    def stats(self) -> LaneStats:
        core = self.core.stats()
        return LaneStats(
            self.spec.instance_id,
            self.requests,
            self.blocks,
            core.unique_blocks,
            core.memory_bytes,
            core.expired_blocks,
        )

    def close(self) -> None:
        self.core.close()
