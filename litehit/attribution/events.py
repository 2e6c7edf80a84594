"""The KV events of one worker as the attribution store consumes them, whatever their source
(the HTTP event route, the ZMQ subscriber of vLLM/SGLang KV events).

A worker's stream is a sequence of batches. Within one epoch (one life of the worker process)
``seq`` grows by exactly 1 per batch; a jump is a gap in the evidence; a new epoch is a restart.
Block hashes are reduced to 64-bit digests by :func:`block_digest`, the same way for events and
for lookups, so the store never compares two spellings of one hash as different keys; the key of
a block in a KV-cache group other than 0 is its digest mixed with the group (litehit.attribution.store.group_keys),
so one hash in two groups is two keys.

KV-cache groups. A hybrid model keeps several independently evicted caches per worker (vLLM calls
them KV-cache groups: full attention, sliding window, Mamba state, ...). vLLM names the group of
a stored or removed block (``group_idx``) and, on stores, its kind (``kv_cache_spec_kind``); an
event without a group is of group 0, the only group of an engine that does not name groups.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FULL_ATTENTION_KINDS",
    "MAX_GROUP",
    "BlockEvent",
    "EventBatch",
    "EventType",
    "block_digest",
    "hash_value",
]

_I64_MIN = -(1 << 63)
_U64_END = 1 << 64
MAX_GROUP = (1 << 31) - 1
"""The largest KV-cache group number taken (vLLM numbers its groups 0, 1, ...)."""
FULL_ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
"""The group kinds (vLLM's ``kv_cache_spec_kind``) that are full attention: a lookup that names no
group asks about the worker's one group of such a kind."""
MAX_HASH_BITS = 1024
"""Block hashes of up to 1024 bits (128 bytes) are taken; vLLM's sha256 hashes have 256."""


class EventType(enum.StrEnum):
    STORED = "stored"  # the blocks became resident
    REMOVED = "removed"  # the blocks were evicted
    CLEARED = "cleared"  # every resident block was dropped (block_hashes is empty)


@dataclass(frozen=True, slots=True)
class BlockEvent:
    """``group``: the KV-cache group the blocks belong to (None: not named, group 0);
    ``group_kind``: on a stored event, what kind of cache that group is (vLLM's
    ``kv_cache_spec_kind``, e.g. ``full_attention``, ``sliding_window``, ``mamba``)."""

    type: EventType
    block_hashes: tuple[int, ...] = ()
    group: int | None = None
    group_kind: str | None = None


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


def hash_value(value: Any) -> int:
    """A block hash as vLLM publishes it, in JSON: an integer, or its bytes as hex digits
    (``bytes.hex()``, an optional ``0x`` in front), read big-endian exactly as the ZMQ subscriber
    reads a bytes hash. Raises ValueError otherwise (booleans and floats are not hashes)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("a block hash is an integer or a hex string (the hash's bytes, as bytes.hex() writes them)")
    if isinstance(value, str):
        digits = value[2:] if value[:2] in ("0x", "0X") else value
        if not digits or len(digits) > MAX_HASH_BITS // 4 or digits.strip("0123456789abcdefABCDEF"):
            raise ValueError(f"a hex block hash is 1 to {MAX_HASH_BITS // 4} hex digits (optionally after 0x)")
        return int(digits, 16)
    if value.bit_length() > MAX_HASH_BITS:
        raise ValueError(f"a block hash has at most {MAX_HASH_BITS} bits")
    return value
