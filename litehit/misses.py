"""Miss attribution: where every input token goes, per instance and capacity.

    hit       prefix hits at this capacity
    evicted   blocks resident at infinite capacity but not here: lost only to the capacity limit
    cold      blocks after the first never-seen block (no_match)
    expired   blocks after the first TTL-expired block
    tail      tokens that never form a full block
The parts add up exactly to the input tokens. Plain 7-column facts cannot tell cold from expired
(their sum is reported as cold_or_expired); extended facts (replay with facts_format
"extended") can, exactly: the replay remembers expired keys for that purpose.

A hybrid lane's byte-step rows (HYBRID_G5.md) count as resident at infinite capacity the blocks
up to its deepest restore point (its last point's hit blocks); the rest of its complete blocks
(cold, expired, or no restorable state there) is cold_or_expired. Its capacities are in bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core_c.errors import CoreInvalidArgument
from core_c.lane import CUT_COLD, CUT_EXPIRED
from litehit.capacity import CapacitySlot
from litehit.errors import FactsError
from litehit.facts import FactsStream
from litehit.query import slot_arrays

__all__ = ["Attribution", "attribute_misses"]


@dataclass(frozen=True)
class Attribution:
    instance_id: str
    capacity_gb: float | None  # None for a capacity in blocks or tokens
    capacity: str  # the capacity as a label: "inf", "2 GiB", "512 MiB", "20,000 blocks"
    input_tokens: int
    hit: int
    evicted: int
    cold: int | None  # None with plain facts
    expired: int | None
    cold_or_expired: int
    tail: int

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def attribute_misses(path: str | Path, slots: Sequence[CapacitySlot]) -> tuple[bool, list[Attribution]]:
    """Per instance (byte order of ids) and slot. Returns (facts are extended, attributions)."""
    all_slots = [*slots, CapacitySlot(-1.0)]  # the infinite value separates hits from evictions
    n = len(all_slots)
    slot_values, slot_kinds = slot_arrays(all_slots)
    stream = FactsStream(path, byte_steps=True)  # block or token capacities on hybrid rows: the query refuses
    cap = 16
    sums = _zeros(cap, n)
    full = np.zeros(cap, np.int64)  # tokens in complete blocks
    beyond = {CUT_COLD: np.zeros(cap, np.int64), CUT_EXPIRED: np.zeros(cap, np.int64)}  # not resident at inf
    for chunk, groups in stream:
        if len(stream.instances) > cap:
            while cap < len(stream.instances):
                cap *= 2
            sums = (_grow(sums[0], cap * n), _grow(sums[1], cap * n), _grow(sums[2], cap), _grow(sums[3], cap))
            full = _grow(full, cap)
            beyond = {k: _grow(v, cap) for k, v in beyond.items()}
        try:
            chunk.query(slot_values, slot_kinds, groups, sums)
        except CoreInvalidArgument as exc:  # a block or token capacity on a hybrid lane's row
            raise FactsError(str(path), 0, exc.message) from None
        bs, blocks, cut = chunk.column("block_size"), chunk.column("blocks"), chunk.column("cut")
        seg_offsets, segs = chunk.column("seg_offsets"), chunk.column("segs")
        rows_of_seg = np.repeat(np.arange(chunk.rows), np.diff(seg_offsets))
        resident = np.bincount(rows_of_seg, weights=segs[:, 1], minlength=chunk.rows).astype(np.int64)
        steps = np.flatnonzero(chunk.column("step") & (np.diff(seg_offsets) > 0))
        resident[steps] = segs[seg_offsets[steps + 1] - 1, 1]  # byte steps: the deepest restore point
        np.add.at(full, groups, blocks * bs)
        for code, acc in beyond.items():
            mine = cut == code
            np.add.at(acc, groups[mine], (blocks[mine] - resident[mine]) * bs[mine])
    hit_tokens, inputs = sums[1].astype(np.int64), sums[3].astype(np.int64)
    out = []
    for g in sorted(range(len(stream.instances)), key=lambda g: stream.instances.names[g]):
        row = hit_tokens[g * n : (g + 1) * n]
        cold, expired = int(beyond[CUT_COLD][g]), int(beyond[CUT_EXPIRED][g])
        for i, slot in enumerate(slots):
            out.append(
                Attribution(
                    instance_id=stream.instances.names[g].decode("utf-8", "replace"),
                    capacity_gb=slot.capacity_gb,
                    capacity=slot.label,
                    input_tokens=int(inputs[g]),
                    hit=int(row[i]),
                    evicted=int(row[-1] - row[i]),
                    cold=cold if stream.extended else None,
                    expired=expired if stream.extended else None,
                    cold_or_expired=cold + expired,
                    tail=int(inputs[g] - full[g]),
                )
            )
    return stream.extended, out


_Sums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _zeros(groups: int, slots: int) -> _Sums:
    return (
        np.zeros(groups * slots, np.uint64),
        np.zeros(groups * slots, np.uint64),
        np.zeros(groups, np.uint64),
        np.zeros(groups, np.uint64),
    )


def _grow(a: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=a.dtype)
    out[: len(a)] = a
    return out
