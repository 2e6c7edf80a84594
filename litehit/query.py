"""Capacity queries over published facts, compatible with the original facts query tool.

Output JSONL (exact keys, key order and number formatting of the original):
one row per facts row, then one summary per instance (byte-wise sorted), then the total.
Integer sums first, rates last: a summary rate is sum(hit tokens) / sum(input tokens).
Memory is O(instances x capacities) apart from the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from core_c.errors import CoreInvalidArgument
from core_c.query import SLOT_BLOCKS, SLOT_BYTES, SLOT_INFINITE, SLOT_TOKENS
from litehit.capacity import CapacitySlot, parse_capacities
from litehit.errors import FactsError
from litehit.facts import FactsStream

__all__ = [
    "CapacitySlot",
    "QueryResult",
    "Summary",
    "json_string",
    "parse_capacities",
    "query_facts",
    "slot_arrays",
    "summary_line",
]

_KINDS = {"bytes": SLOT_BYTES, "GiB": SLOT_BYTES, "blocks": SLOT_BLOCKS, "tokens": SLOT_TOKENS}


def slot_arrays(slots: Sequence[CapacitySlot]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint8]]:
    """The slots as the C query reads them: each one's value and what it means (core_c.query)."""
    values = [s.count if s.per_lane else s.capacity_bytes for s in slots]
    kinds = [SLOT_INFINITE if s.infinite else _KINDS[s.unit] for s in slots]
    return np.array(values, dtype=np.uint64), np.array(kinds, dtype=np.uint8)


class Writer(Protocol):
    def write(self, data: bytes | memoryview, /) -> object: ...


@dataclass
class Summary:
    instance_id: bytes | None  # None for the total over all instances
    requests: int
    total_input_tokens: int
    total_hit_blocks: list[int]
    total_hit_tokens: list[int]

    @property
    def hit_rates(self) -> list[float]:
        if self.total_input_tokens == 0:
            return [0.0] * len(self.total_hit_tokens)
        return [tokens / self.total_input_tokens for tokens in self.total_hit_tokens]


@dataclass
class QueryResult:
    slots: list[CapacitySlot]
    instances: list[Summary]  # byte-wise sorted by instance id
    total: Summary
    rows: int


def json_string(raw: bytes) -> bytes:
    """The original's JSON escaping: only " \\ \\n \\r \\t; other bytes pass through raw."""
    return (
        b'"'
        + raw.replace(b"\\", b"\\\\")
        .replace(b'"', b'\\"')
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
        .replace(b"\t", b"\\t")
        + b'"'
    )


def _numbers(values: Sequence[float | int], fmt: str) -> bytes:
    return b"[" + b",".join(format(v, fmt).encode() for v in values) + b"]"


def _gb_text(capacity_gb: float) -> bytes:
    """A capacity_gb as the original prints it (%g); an infinite one given as inf is -1, the
    original's infinite capacity (JSON has no Infinity)."""
    return format(-1.0 if math.isinf(capacity_gb) else capacity_gb, "g").encode()


def summary_line(summary: Summary, slots: Sequence[CapacitySlot]) -> bytes:
    """The original's summary line; when a capacity was given with a unit, capacity_gb holds its
    GiB (null for blocks and tokens, whose bytes depend on the lane) and a last key "capacities"
    the capacities as given (plain numbers keep the original's bytes exactly)."""
    head = b'{"summary":true,'
    if summary.instance_id is not None:
        head += b'"instance_id":' + json_string(summary.instance_id) + b","
    gb = b"[" + b",".join(b"null" if s.capacity_gb is None else _gb_text(s.capacity_gb) for s in slots) + b"]"
    tail = b""
    if any(s.unit != "GiB" for s in slots):
        tail = b',"capacities":[' + b",".join(json_string(str(s.recorded_gb).encode()) for s in slots) + b"]"
    return (
        head
        + b'"requests":%d,"total_input_tokens":%d,"capacity_gb":' % (summary.requests, summary.total_input_tokens)
        + gb
        + b',"total_hit_blocks":'
        + _numbers(summary.total_hit_blocks, "d")
        + b',"total_hit_tokens":'
        + _numbers(summary.total_hit_tokens, "d")
        + b',"hit_rates":'
        + _numbers(summary.hit_rates, "g")
        + tail
        + b"}\n"
    )


def query_facts(path: str | Path, slots: Sequence[CapacitySlot], out: Writer | None = None) -> QueryResult:
    """Projects every facts row at every slot. With ``out``, writes the original query's JSONL
    (per-request rows, per-instance summaries, total). Raises FactsError on a malformed row."""
    slot_values, slot_kinds = slot_arrays(slots)
    n = len(slots)
    stream = FactsStream(path, byte_steps=True)  # hybrid lanes' rows: bytes and inf (the C query)
    capacity = 16
    sums = _zero_sums(capacity, n)
    for chunk, groups in stream:
        if len(stream.instances) > capacity:
            while capacity < len(stream.instances):
                capacity *= 2
            sums = _grow_sums(sums, capacity, n)
        try:
            chunk.query(slot_values, slot_kinds, groups, sums, sink=None if out is None else out.write)
        except CoreInvalidArgument as exc:  # a block or token capacity on a hybrid lane's row
            raise FactsError(str(path), 0, exc.message) from None
    blocks, tokens, requests, inputs = sums
    summaries = [
        Summary(
            name,
            int(requests[g]),
            int(inputs[g]),
            [int(v) for v in blocks[g * n : (g + 1) * n]],
            [int(v) for v in tokens[g * n : (g + 1) * n]],
        )
        for g, name in enumerate(stream.instances.names)
    ]
    summaries.sort(key=lambda s: s.instance_id or b"")
    total = Summary(
        None,
        sum(s.requests for s in summaries),
        sum(s.total_input_tokens for s in summaries),
        [sum(s.total_hit_blocks[i] for s in summaries) for i in range(n)],
        [sum(s.total_hit_tokens[i] for s in summaries) for i in range(n)],
    )
    if out is not None:
        for summary in [*summaries, total]:
            out.write(summary_line(summary, slots))
    return QueryResult(list(slots), summaries, total, stream.rows)


_Sums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _zero_sums(groups: int, slots: int) -> _Sums:
    return (
        np.zeros(groups * slots, dtype=np.uint64),
        np.zeros(groups * slots, dtype=np.uint64),
        np.zeros(groups, dtype=np.uint64),
        np.zeros(groups, dtype=np.uint64),
    )


def _grow_sums(sums: _Sums, groups: int, slots: int) -> _Sums:
    grown = _zero_sums(groups, slots)
    for old, new in zip(sums, grown, strict=True):
        new[: len(old)] = old
    return grown
