"""The KV events of one worker as the attribution store consumes them, whatever their source
(the HTTP event route, the ZMQ subscriber of vLLM/SGLang KV events).

A worker's stream is a sequence of batches. Within one epoch (one life of the worker process)
``seq`` grows by exactly 1 per batch; a jump is a gap in the evidence; a new epoch is a restart.
Block hashes are reduced to 64-bit digests by :func:`block_digest`, the same way for events and
for lookups, so the store never compares two spellings of one hash as different keys.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field

__all__ = ["BlockEvent", "EventBatch", "EventType", "block_digest"]

_I64_MIN = -(1 << 63)
_U64_END = 1 << 64


class EventType(enum.StrEnum):
    STORED = "stored"  # the blocks became resident
    REMOVED = "removed"  # the blocks were evicted
    CLEARED = "cleared"  # every resident block was dropped (block_hashes is empty)


@dataclass(frozen=True, slots=True)
class BlockEvent:
    type: EventType
    block_hashes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EventBatch:
    """One batch of one worker's events, in the order the worker emitted them. ``ts`` is the
    worker's wall clock (seconds since the epoch) when it emitted the batch."""

    epoch: str
    seq: int
    ts: float
    events: tuple[BlockEvent, ...] = field(default=())


def block_digest(block_hash: int | bytes) -> int:
    """The signed 64-bit digest the store keys on. An integer in [-2**63, 2**64) keeps its 64
    bits (two's complement: 2**64 - 1 and -1 are the same digest); a longer integer, and a hash
    given as bytes (read big-endian), is reduced by BLAKE2b to 8 bytes. Digests of distinct long
    hashes collide with probability about 2**-64 per pair."""
    if isinstance(block_hash, bytes | bytearray):
        block_hash = int.from_bytes(block_hash, "big")
    if _I64_MIN <= block_hash < _U64_END:
        v = block_hash & (_U64_END - 1)
        return v - _U64_END if v >= 1 << 63 else v
    width = (block_hash.bit_length() + 8) // 8
    raw = block_hash.to_bytes(width, "big", signed=True)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)
