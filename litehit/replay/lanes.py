"""A lane at run time: the C lane core of one configured instance (the hybrid core for a lane with
linear-attention states), fed LaneWork in order; or lanes that differ only in TTL sharing one lane
core, a TTL view each (SharedLanes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import core_c
from litehit.replay.plan import LaneSpec, LaneWork
from litehit.replay.result import LaneStats

__all__ = ["LaneFacts", "LaneRunner", "LaneStats", "SharedLanes", "shared_units"]


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


def shared_units(lanes: Sequence[LaneSpec], inputs: Sequence[int]) -> list[list[int]]:
    """The lanes (indices into `lanes`, in order) that can share one lane core: Full-only lanes of
    the same requests (``inputs[i]``: the first lane whose normalized requests lane i's are, as
    ReplayPlan.inputs), at most core_c.MAX_VIEWS together; every other lane alone."""
    units: list[list[int]] = []
    open_unit: dict[int, list[int]] = {}
    for i, lane in enumerate(lanes):
        unit = None if lane.hybrid else open_unit.get(inputs[lane.index])
        if unit is None or len(unit) == core_c.MAX_VIEWS:
            unit = []
            units.append(unit)
            if not lane.hybrid:
                open_unit[inputs[lane.index]] = unit
        unit.append(i)
    return units


class SharedLanes:
    """Lanes that see the same requests and differ only in TTL (a fanout's lanes of one block size
    and key hashing, none hybrid), replayed by one lane core with a TTL view per lane
    (core_c.LaneViews): one key map and one LRU order instead of one per lane, as expiry follows
    recency. Each lane's facts are exactly those its own lane core gives."""

    def __init__(self, specs: Sequence[LaneSpec], *, keep_expired: bool = False) -> None:
        if any(spec.hybrid for spec in specs):
            raise ValueError("a hybrid lane has a core of its own")
        self.specs = list(specs)
        self.core = core_c.LaneViews([spec.ttl_ns for spec in specs], keep_expired=keep_expired)
        self.requests = 0
        self.blocks = 0
        self.last: list[LaneFacts] = []  # every lane's facts of the last chunk run

    def run(self, work: LaneWork) -> list[LaneFacts]:
        """Every lane's facts of the chunk, in lane order (also kept in ``last``)."""
        views = self.core.process_batch(work.keys, work.offsets, work.timestamps)
        self.requests += work.requests
        self.blocks += len(work.keys)
        self.last = [LaneFacts(f.segments, f.seg_offsets, f.cuts) for f in views]
        return self.last

    def stats(self, view: int) -> LaneStats:
        """Lane `view`'s: its alive and expired blocks; the core's memory is the first lane's
        (the others hold none of their own beyond their TTL epochs, counted there too)."""
        core = self.core.stats(view)
        return LaneStats(
            self.specs[view].instance_id,
            self.requests,
            self.blocks,
            core.unique_blocks,
            core.memory_bytes if view == 0 else 0,
            core.expired_blocks,
            shares_core_with=self.specs[0].instance_id if view else None,
        )

    def close(self) -> None:
        self.core.close()
