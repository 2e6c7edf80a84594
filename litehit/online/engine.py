"""Online instances: a LiteHit core per instance, its capacity slots and cumulative counters.

A trace query is NormalizeRequest (no re-blocking; a missing length is keys x block_size) ->
the lane core (TTL on wall-clock time, or the request's own timestamp_ns) -> the projector at
every slot, then integer counters. Rates are derived from integer sums, never averaged.
Everything here runs in the one process that owns the instance (litehit/online/owner.py).

A Full-only instance (linear_step 0) runs the lane core and counts its slots in blocks; a hybrid
one (linear_step > 0) runs the hybrid lane (Full blocks and Linear states in one byte budget,
HYBRID_G5.md section 6.3) and counts its slots in bytes: its facts are byte steps, projected at
each slot's total bytes, and its live curve is on the byte axis.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

import core_c
from core_c.hybrid import HybridLane, project_steps_batch
from litehit.capacity import INT64_MAX, CapacitySlot, capacity_blocks
from litehit.db.models import utcnow
from litehit.errors import LiteHitError, OnlineError
from litehit.online.curve import LiveCurve, StepCurve
from litehit.spec import InstanceGroup, InstanceInfo

__all__ = ["PLATEAU_FRACTIONS", "CapacityRefused", "Counters", "OnlineInstance", "RequestRejected", "TraceQuery"]

PLATEAU_FRACTIONS = (0.5, 0.9, 0.99)  # the capacities reaching these shares of the plateau, live


class RequestRejected(LiteHitError):
    """A trace query violates the request contract; nothing of its batch was applied. ``field``
    names the offending field of request ``index``."""

    def __init__(self, index: int, message: str, field: str = "block_keys") -> None:
        self.index, self.message, self.field = index, message, field
        super().__init__(f"request {index}: {message}")


class CapacityRefused(OnlineError):
    """A capacity the instance cannot answer: blocks or tokens on a hybrid instance, whose
    capacities are total bytes (Full blocks and Linear states share them)."""


@dataclass
class Counters:
    queries: int = 0
    input_tokens: int = 0
    blocks: int = 0  # complete blocks
    hit_blocks: list[int] = field(default_factory=list)  # per slot
    max_hit_blocks: int = 0  # at infinite capacity (kept even when not shown)

    def as_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "input_tokens": self.input_tokens,
            "blocks": self.blocks,
            "hit_blocks": list(self.hit_blocks),
            "max_hit_blocks": self.max_hit_blocks,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, slots: int) -> Counters:
        if not data or len(data.get("hit_blocks", [])) != slots:
            return cls(hit_blocks=[0] * slots)
        return cls(
            int(data["queries"]),
            int(data["input_tokens"]),
            int(data["blocks"]),
            [int(v) for v in data["hit_blocks"]],
            int(data["max_hit_blocks"]),
        )


@dataclass(frozen=True)
class TraceQuery:
    block_keys: list[int] | npt.NDArray[np.int64]
    input_token_len: int | None = None  # None or 0: derived as keys x block_size
    timestamp_ns: int | None = None  # None: wall clock


class OnlineInstance:
    """The live state of one registered instance."""

    def __init__(self, info: InstanceInfo, group: InstanceGroup, counters: dict[str, Any] | None = None) -> None:
        self.info, self.group = info, group
        self.block_bytes = info.block_bytes  # the Full charge
        self.hybrid = info.linear_step > 0
        self.capacity_gb = sorted(group.capacity_gb)  # the original sorts slots on load
        # registration accepts only finite, non-negative capacities, so every slot is finite
        # trunc(gb x 1024^3), saturating at INT64_MAX as the original's registration does
        self.capacity_bytes = [min(CapacitySlot(gb).capacity_bytes, INT64_MAX) for gb in self.capacity_gb]
        curve = (counters or {}).get("curve")
        self.lane: core_c.Lane | HybridLane
        self.curve: LiveCurve | StepCurve  # the exact hits at any capacity, restored with the counters
        if self.hybrid:
            self.slots: list[int] = self.capacity_bytes
            self.lane = HybridLane(
                full_charge=self.block_bytes,
                linear_charge=info.linear_charge_bytes,
                step_blocks=info.linear_step_blocks,
                ttl_ns=group.ttl_ns,
            )
            self.curve = StepCurve.from_state(curve)
        else:
            self.slots = [_finite(capacity_blocks(gb, self.block_bytes)) for gb in self.capacity_gb]
            self.lane = core_c.Lane(ttl_ns=group.ttl_ns)
            self.curve = LiveCurve.from_state(curve)
        self.counters = Counters.from_dict(counters, len(self.slots))
        if not self.counters.queries:
            self.curve = type(self.curve)()
        self.state_since: datetime = utcnow()  # the LRU state is rebuilt empty at load
        self.last_timestamp_ns: int | None = None  # of the last applied request
        self.dirty = False

    @property
    def instance_id(self) -> str:
        return self.info.instance_id

    def close(self) -> None:
        self.lane.close()

    def query(self, requests: list[TraceQuery], *, clock: Any = time.time_ns) -> list[dict[str, Any]]:
        """Applies trace queries in order and returns one result per request. Every request is
        validated first: a rejected one (RequestRejected) leaves the instance unchanged."""
        n = len(requests)
        sizes = np.fromiter((len(r.block_keys) for r in requests), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        keys = np.empty(int(offsets[-1]), dtype=np.int64)
        for i, r in enumerate(requests):
            keys[offsets[i] : offsets[i + 1]] = r.block_keys
        lens = np.fromiter((r.input_token_len or 0 for r in requests), dtype=np.int64, count=n)
        try:
            batch = core_c.normalize_batch(
                keys, offsets, lens, self.info.block_size, prefix_hash=bool(self.group.enable_prefix_hash)
            )
        except core_c.CoreError as exc:
            raise RequestRejected(exc.index or 0, exc.message) from None
        now = clock()
        stamps = np.fromiter(
            (now if r.timestamp_ns is None else r.timestamp_ns for r in requests), dtype=np.int64, count=n
        )
        if self.group.ttl_ns and n:
            self._check_time_order(stamps)
        if isinstance(self.lane, HybridLane):
            steps = self.lane.process_batch(batch.keys, batch.offsets, stamps)
            assert isinstance(self.curve, StepCurve)
            self.curve.add(steps.points, steps.point_offsets)
            hits = project_steps_batch(steps, [*self.slots, None]).astype(np.int64)
        else:
            facts = self.lane.process_batch(batch.keys, batch.offsets, stamps)
            assert isinstance(self.curve, LiveCurve)
            self.curve.add(facts.segments)
            hits = core_c.project_batch(facts.segments, facts.seg_offsets, [*self.slots, None]).astype(np.int64)
        if n:
            self.last_timestamp_ns = int(stamps[-1])
        self._count(batch, hits)
        return self._results(batch.input_lens, np.diff(batch.offsets), hits)

    def _check_time_order(self, stamps: npt.NDArray[np.int64]) -> None:
        """A TTL group ages blocks by the requests' timestamps, which must not go backwards (as
        offline, where an unsorted trace fails): RequestRejected names the first that does."""
        before = np.empty_like(stamps)
        before[0] = stamps[0] if self.last_timestamp_ns is None else self.last_timestamp_ns
        before[1:] = stamps[:-1]
        bad = np.flatnonzero(stamps < before)
        if len(bad):
            i = int(bad[0])
            raise RequestRejected(
                i,
                f"timestamp_ns {int(stamps[i])} is before the previous request's {int(before[i])}: "
                "a TTL group needs non-decreasing timestamps (a request without one is stamped now)",
                field="timestamp_ns",
            )

    def _count(self, batch: core_c.NormalizedBatch, hits: npt.NDArray[np.int64]) -> None:
        c = self.counters
        c.queries += len(batch)
        c.input_tokens += int(batch.input_lens.sum())
        c.blocks += len(batch.keys)
        sums = hits.sum(axis=0)
        c.hit_blocks = [a + int(b) for a, b in zip(c.hit_blocks, sums[:-1], strict=True)]
        c.max_hit_blocks += int(sums[-1])
        self.dirty = True

    def _results(
        self, lens: npt.NDArray[np.int64], blocks: npt.NDArray[np.int64], hits: npt.NDArray[np.int64]
    ) -> list[dict[str, Any]]:
        bs = self.info.block_size
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = np.where(lens[:, None] > 0, hits * bs / np.maximum(lens, 1)[:, None], 0.0)
        show_max = self.group.enable_theoretical_max_cache
        out = []
        for i, (length, n_blocks) in enumerate(zip(lens.tolist(), blocks.tolist(), strict=True)):
            row_hits, row_rates = hits[i].tolist(), rates[i].tolist()
            out.append(
                {
                    "input_token_len": length,
                    "blocks": n_blocks,
                    "hit_blocks": row_hits[:-1],
                    "hit_rates": row_rates[:-1],
                    "max_hit_blocks": row_hits[-1] if show_max else -1,
                    "max_hit_rate": row_rates[-1] if show_max else -1.0,
                }
            )
        return out

    def snapshot_state(self) -> dict[str, Any]:
        """What a snapshot stores: the counters and the live curve."""
        return {**self.counters.as_dict(), "curve": self.curve.state()}

    def curve_view(
        self, capacities: Sequence[CapacitySlot], tiers: Sequence[tuple[str, CapacitySlot]], mode: str, points: int
    ) -> dict[str, Any]:
        """The live curve: hits at the asked capacities, the tier split, the capacities reaching
        50/90/99% of the plateau, and at most `points` breakpoints (evenly spaced in hits)."""
        c, bs, bb = self.counters, self.info.block_size, self.block_bytes
        blocks_of = self._curve_capacity

        def point(size: int | None, hits: int) -> dict[str, Any]:
            return {
                "capacity_blocks": None if self.hybrid or size is None else size,
                "capacity_bytes": None if size is None else size if self.hybrid else size * bb,
                "hit_blocks": hits,
                "hit_tokens": hits * bs,
                "hit_rate": hits * bs / c.input_tokens if c.input_tokens else 0.0,
            }

        asked = [blocks_of(s) for s in capacities]
        answers = [
            {"capacity": s.label, **point(b, h)}
            for s, b, h in zip(capacities, asked, self.curve.hit_blocks(asked), strict=True)
        ]
        split = []
        if tiers:
            sizes = [blocks_of(s) for _, s in tiers]
            if mode == "inclusive":
                served = self.curve.hit_blocks(sizes)
            else:
                total: int | None = 0
                cumulative: list[int | None] = []
                for size in sizes:
                    total = None if total is None or size is None else total + size
                    cumulative.append(total)
                served = self.curve.hit_blocks(cumulative)
            previous = 0
            for (name, slot), size, upto in zip(tiers, sizes, served, strict=True):
                split.append({"name": name, "capacity": slot.label, **point(size, upto - previous)})
                previous = upto
        caps, hits = self.curve.breakpoints()
        if len(caps) > points:
            keep = np.unique(np.searchsorted(hits, np.linspace(0, hits[-1], points), side="left"))
            caps, hits = caps[keep], hits[keep]
        return {
            "instance_id": self.instance_id,
            "block_size": bs,
            "block_bytes": bb,
            "linear_step": self.info.linear_step,
            "capacity_unit": self.curve.unit,
            "queries": c.queries,
            "input_tokens": c.input_tokens,
            "state_since": self.state_since,
            "infinite": point(None, self.curve.hit_blocks([None])[0]),
            "targets": [
                {"fraction": f, **point(b, self.curve.hit_blocks([b])[0] if b is not None else 0)}
                for f in PLATEAU_FRACTIONS
                for b in [self.curve.capacity_reaching(f)]
            ],
            "capacities": answers,
            "mode": mode,
            "tiers": split,
            "breakpoints": {
                "columns": [f"capacity_{self.curve.unit}", "hit_blocks", "hit_rate"],
                "rows": [
                    [int(k), int(h), int(h) * bs / c.input_tokens if c.input_tokens else 0.0]
                    for k, h in zip(caps, hits, strict=True)
                ],
            },
            "curve_memory_bytes": self.curve.memory_bytes,
        }

    def _curve_capacity(self, slot: CapacitySlot) -> int | None:
        """A capacity in the live curve's unit: blocks (Full-only) or total bytes (hybrid); None
        when infinite. CapacityRefused for blocks or tokens on a hybrid instance."""
        if not self.hybrid:
            return slot.blocks(self.block_bytes, self.info.block_size)
        if slot.per_lane:
            raise CapacityRefused(
                f"instance {self.instance_id} is hybrid (linear_step {self.info.linear_step}): Full blocks and "
                f"Linear states share its bytes, so give its capacities in bytes (4GiB, 512MiB, inf), not {slot.label}"
            )
        return None if slot.infinite else slot.capacity_bytes

    def plateau_capacity_bytes(self, fraction: float) -> int | None:
        """The capacity in bytes reaching fraction of the live curve's plateau (None before a hit)."""
        reached = self.curve.capacity_reaching(fraction)
        if reached is None or self.hybrid:
            return reached
        return reached * self.block_bytes

    def _resident(self) -> dict[str, Any]:
        """What the core holds now, as the original's ListInstances reports it: resident Full
        blocks, their bytes (plus the Linear states' on a hybrid instance) and bytes per block."""
        stats = self.lane.stats()
        if isinstance(stats, core_c.LaneStats):
            used, linear = stats.unique_blocks * self.block_bytes, 0
            per_block = self.block_bytes
        else:
            used, linear = stats.resident_bytes, stats.resident_linear
            per_block = used // stats.unique_blocks if stats.unique_blocks else 0
        return {
            "unique_blocks": stats.unique_blocks,
            "resident_linear_states": linear,
            "kv_cache_usage_bytes": used,
            "bytes_per_block": per_block,
            "engine_memory_bytes": stats.memory_bytes,
            "expired_blocks": stats.expired_blocks,
        }

    def _capacity_blocks(self) -> dict[str, Any]:
        """The slots in blocks: exact for a Full-only instance; a hybrid one has none (its slots
        are bytes) and shows the original's estimate instead, trunc(bytes x step / (step x Full
        charge + Linear charge)): one state spread over a step of blocks. Hits never use it."""
        if not self.hybrid:
            return {"capacity_blocks": self.slots, "estimated_capacity_blocks": self.slots}
        step, linear = self.info.linear_step_blocks, self.info.linear_charge_bytes
        per_step = step * self.block_bytes + linear
        return {
            "capacity_blocks": [None] * len(self.slots),
            "estimated_capacity_blocks": [b * step // per_step for b in self.capacity_bytes],
        }

    def summary(self) -> dict[str, Any]:
        """ListInstances: integer sums first, rates derived from them."""
        c = self.counters
        bs = self.info.block_size

        def rate(blocks: int) -> float:
            return blocks * bs / c.input_tokens if c.input_tokens else 0.0

        show_max = self.group.enable_theoretical_max_cache
        return {
            "instance_id": self.instance_id,
            "instance_group_name": self.group.name,
            "block_size": bs,
            "block_bytes": self.block_bytes,
            "linear_step": self.info.linear_step,
            "linear_charge_bytes": self.info.linear_charge_bytes,
            "ttl_seconds": self.group.ttl_seconds,
            "capacity_gb": self.capacity_gb,
            "capacity_bytes": self.capacity_bytes,
            **self._capacity_blocks(),
            "total_queries": c.queries,
            "total_input_tokens": c.input_tokens,
            "total_blocks": c.blocks,
            "total_hit_blocks": c.hit_blocks,
            "total_hit_tokens": [h * bs for h in c.hit_blocks],
            "hit_rates": [rate(h) for h in c.hit_blocks],
            "max_hit_blocks": c.max_hit_blocks if show_max else -1,
            "max_hit_rate": rate(c.max_hit_blocks) if show_max else -1.0,
            **self._resident(),
            "state_since": self.state_since,
        }


def _finite(blocks: int | None) -> int:
    if blocks is None:
        raise ValueError("an online slot must be finite")
    return blocks
