"""The KV-event wire format of vLLM and SGLang (their ZMQ publisher), and its decoder into the
:class:`~litehit.attribution.events.EventBatch` the store consumes.

One live message is a ZMQ multipart ``[topic, seq, payload]``: ``seq`` is 8 bytes, big-endian,
unsigned, 0 when the engine process starts and +1 per batch; ``payload`` is msgpack. The payload
is the engine's ``EventBatch(ts, events, data_parallel_rank=None)`` as an array
``[ts, events]`` / ``[ts, events, dp_rank]`` (a map with those keys is read too). Each event is
tagged with its class name, as a tagged array (vLLM before its map switch, SGLang before its)::

    ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
     lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]
    ["BlockRemoved", block_hashes, medium, group_idx]
    ["AllBlocksCleared"]

or as a tagged map with the same field names and the tag under ``"type"`` (newer engines)::

    {"type": "BlockRemoved", "block_hashes": [...], "medium": "GPU", "group_idx": 0}

Older engines stop earlier (no ``medium`` and later fields: SGLang, early vLLM) and newer ones
append more, so trailing fields may be missing or extra; only ``block_hashes``, ``medium``,
``group_idx`` (the KV-cache group of a hybrid model; vLLM names it on stores and removals, SGLang
does not) and, on stores, ``kv_cache_spec_kind`` (the group's kind, lower-cased) are read. A block
hash is a msgpack integer (64-bit) or bytes (e.g. a sha256 digest), read big-endian; the store
reduces both with :func:`~litehit.attribution.events.block_digest`. A payload nested too deeply to
decode is malformed like any other.

``medium`` names the cache tier: a removal from a CPU-offload tier is not a GPU prefix-cache
eviction, so by default only events whose medium is absent or ``"GPU"`` count (case-insensitive);
the others are skipped and counted. An event type this decoder does not know is skipped and
counted too; anything else malformed fails the whole batch with :class:`KVEventDecodeError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import msgspec

from litehit.attribution.events import MAX_GROUP, BlockEvent, EventBatch, EventType
from litehit.errors import KVEventDecodeError

__all__ = [
    "DEFAULT_MEDIA",
    "AllBlocksClearedArray",
    "AllBlocksClearedMap",
    "BlockRemovedArray",
    "BlockRemovedMap",
    "BlockStoredArray",
    "BlockStoredMap",
    "DecodedBatch",
    "EventBatchArray",
    "EventBatchMap",
    "KVEventDecoder",
    "normalize_media",
]

DEFAULT_MEDIA: frozenset[str | None] = frozenset({None, "GPU"})
"""The media whose events count by default: no medium given, or the GPU prefix cache."""

_UNSET = msgspec.Raw()  # a field this decoder skips without looking at it


# -- the batch envelope; events stay raw until their own shape (array or map) is known --------


class EventBatchArray(msgspec.Struct, array_like=True, gc=False):
    """``[ts, events]`` or ``[ts, events, data_parallel_rank]``."""

    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


class EventBatchMap(msgspec.Struct, gc=False):
    """``{"ts": ..., "events": [...], "data_parallel_rank": ...}``."""

    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


# -- events as tagged arrays: every field before medium holds its place ------------------------


class BlockStoredArray(msgspec.Struct, array_like=True, gc=False, tag="BlockStored"):
    block_hashes: list[int | bytes]
    parent_block_hash: msgspec.Raw = _UNSET  # int | bytes | None
    token_ids: msgspec.Raw = _UNSET  # list[int]
    block_size: msgspec.Raw = _UNSET  # int
    lora_id: msgspec.Raw = _UNSET  # int | None
    medium: str | None = None
    lora_name: msgspec.Raw = _UNSET  # str | None
    extra_keys: msgspec.Raw = _UNSET  # list | None
    group_idx: int | None = None  # the KV-cache group (vLLM with hybrid-model KV events)
    kv_cache_spec_kind: str | None = None  # that group's kind: full_attention, sliding_window, mamba, ...
    # then kv_cache_spec_sliding_window, ...: ignored


class BlockRemovedArray(msgspec.Struct, array_like=True, gc=False, tag="BlockRemoved"):
    block_hashes: list[int | bytes]
    medium: str | None = None
    group_idx: int | None = None
    # then anything newer: ignored


class AllBlocksClearedArray(msgspec.Struct, array_like=True, gc=False, tag="AllBlocksCleared"):
    pass


# -- events as tagged maps (tag under "type"): unknown keys are ignored ------------------------


class BlockStoredMap(msgspec.Struct, gc=False, tag="BlockStored"):
    block_hashes: list[int | bytes]
    medium: str | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None


class BlockRemovedMap(msgspec.Struct, gc=False, tag="BlockRemoved"):
    block_hashes: list[int | bytes]
    medium: str | None = None
    group_idx: int | None = None


class AllBlocksClearedMap(msgspec.Struct, gc=False, tag="AllBlocksCleared"):
    pass


_ArrayEvent: TypeAlias = BlockStoredArray | BlockRemovedArray | AllBlocksClearedArray
_MapEvent: TypeAlias = BlockStoredMap | BlockRemovedMap | AllBlocksClearedMap
_WireEvent: TypeAlias = _ArrayEvent | _MapEvent
_KNOWN_TAGS = frozenset({"BlockStored", "BlockRemoved", "AllBlocksCleared"})


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """One decoded payload: the batch as the store takes it, and what was left out of it."""

    batch: EventBatch
    skipped_medium: int  # events of a medium the filter does not count
    skipped_unknown: int  # events of a type this decoder does not know
    data_parallel_rank: int | None


def normalize_media(media: Iterable[str | None] | None) -> frozenset[str | None] | None:
    """The medium filter in canonical form: names upper-cased; ``None`` inside stands for events
    without a medium; ``None`` as a whole means every medium counts."""
    if media is None:
        return None
    if isinstance(media, str):
        raise TypeError("media is a collection of medium names, not one string")
    return frozenset(m if m is None else m.strip().upper() for m in media)


def _is_map(first_byte: int) -> bool:
    """Whether a msgpack value starting with this byte is a map (fixmap, map16, map32)."""
    return 0x80 <= first_byte <= 0x8F or first_byte in (0xDE, 0xDF)


def _hash_ints(i: int, hashes: list[int | bytes]) -> tuple[int, ...]:
    """Event ``i``'s block hashes as integers (bytes read big-endian)."""
    if bytes not in map(type, hashes):  # the common case, checked without a Python-level loop
        return cast("tuple[int, ...]", tuple(hashes))
    if b"" in hashes:
        raise KVEventDecodeError(f"event {i}: an empty bytes block hash")
    return tuple(h if isinstance(h, int) else int.from_bytes(h, "big") for h in hashes)


class KVEventDecoder:
    """Decodes engine payloads into store batches. Stateless apart from its medium filter, so
    one decoder serves any number of payloads (from one thread at a time)."""

    def __init__(self, media: Iterable[str | None] | None = DEFAULT_MEDIA) -> None:
        self.media = normalize_media(media)
        self._batch_array = msgspec.msgpack.Decoder(EventBatchArray)
        self._batch_map = msgspec.msgpack.Decoder(EventBatchMap)
        self._event_array: msgspec.msgpack.Decoder[_ArrayEvent] = msgspec.msgpack.Decoder(_ArrayEvent)
        self._event_map: msgspec.msgpack.Decoder[_MapEvent] = msgspec.msgpack.Decoder(_MapEvent)

    def counts(self, medium: str | None) -> bool:
        """Whether an event of this medium passes the filter."""
        if self.media is None:
            return True
        return (medium if medium is None else medium.upper()) in self.media

    def decode(self, payload: bytes, *, epoch: str, seq: int) -> DecodedBatch:
        """The batch in ``payload`` as the store's batch ``seq`` of ``epoch``. Raises
        :class:`KVEventDecodeError` when the payload is not a well-formed batch."""
        if not payload:
            raise KVEventDecodeError("an empty payload")
        try:
            wire = (self._batch_map if _is_map(payload[0]) else self._batch_array).decode(payload)
        except msgspec.DecodeError as e:
            raise KVEventDecodeError(f"batch: {e}") from None
        except RecursionError:
            raise KVEventDecodeError("batch: nested too deeply") from None
        if not math.isfinite(wire.ts):
            raise KVEventDecodeError(f"batch: ts is {wire.ts}")
        events: list[BlockEvent] = []
        skipped_medium = skipped_unknown = 0
        for i, raw in enumerate(wire.events):
            event = self._decode_event(i, raw)
            if event is None:
                skipped_unknown += 1
            elif isinstance(event, AllBlocksClearedArray | AllBlocksClearedMap):
                events.append(BlockEvent(EventType.CLEARED))
            elif not self.counts(event.medium):
                skipped_medium += 1
            else:
                group = event.group_idx
                if group is not None and not 0 <= group <= MAX_GROUP:
                    raise KVEventDecodeError(f"event {i}: group_idx {group} is not in 0..{MAX_GROUP}")
                hashes = _hash_ints(i, event.block_hashes)
                if isinstance(event, BlockStoredArray | BlockStoredMap):
                    kind = event.kv_cache_spec_kind
                    events.append(BlockEvent(EventType.STORED, hashes, group, kind.strip().lower() if kind else None))
                else:
                    events.append(BlockEvent(EventType.REMOVED, hashes, group))
        batch = EventBatch(epoch=epoch, seq=seq, ts=wire.ts, events=tuple(events))
        return DecodedBatch(batch, skipped_medium, skipped_unknown, wire.data_parallel_rank)

    def _decode_event(self, i: int, raw: msgspec.Raw) -> _WireEvent | None:
        """One event, or None when its tag names an event type this decoder does not know."""
        view = memoryview(raw)
        if not view:
            raise KVEventDecodeError(f"event {i}: empty")
        decoder: msgspec.msgpack.Decoder[Any] = self._event_map if _is_map(view[0]) else self._event_array
        try:
            event: _WireEvent = decoder.decode(raw)
            return event
        except msgspec.DecodeError as e:
            if _unknown_tag(raw):
                return None
            raise KVEventDecodeError(f"event {i}: {e}") from None
        except RecursionError:
            raise KVEventDecodeError(f"event {i}: nested too deeply") from None


def _unknown_tag(raw: msgspec.Raw) -> bool:
    """Whether this event is well-formed msgpack tagged with a name this decoder does not know."""
    try:
        value = msgspec.msgpack.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return False
    if isinstance(value, list) and value:
        tag = value[0]
    elif isinstance(value, dict):
        tag = value.get("type")
    else:
        return False
    return isinstance(tag, str) and tag not in _KNOWN_TAGS
