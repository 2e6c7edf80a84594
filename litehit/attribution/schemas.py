"""The documents of live attribution: a batch of one worker's KV events, a lookup of the first
uncached block of a request that missed, and its answer. The HTTP routes (api/attribution.py,
api/routes/attribution.py) and `litehit attribution replay` (one line of an event log each)
validate the same models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.config import JsonDict

from litehit.attribution.answers import Cause, Lookup, Outcome
from litehit.attribution.events import MAX_GROUP, MAX_HASH_BITS, BlockEvent, EventBatch, EventType, hash_value
from litehit.limits import BATCH_MAX

__all__ = [
    "WORKER_PATTERN",
    "AttributionResult",
    "BlockHash",
    "EventBatchBody",
    "EventBody",
    "LookupBatch",
    "LookupBody",
]

WORKER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$"
"""A worker name: letters, digits and _ . : - (starting with a letter or digit), at most 255
characters; the same names the ZMQ endpoint setting takes, and safe as one path segment."""

BlockHash = Annotated[
    int,
    BeforeValidator(hash_value),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer"},
                {"type": "string", "pattern": f"^(0[xX])?[0-9a-fA-F]{{1,{MAX_HASH_BITS // 4}}}$"},
            ],
            "description": "a block hash as the engine publishes it: an integer (vLLM's 64-bit hashes), or the "
            "hash's bytes as hex digits (vLLM's sha256 hashes, as bytes.hex() writes them), read big-endian",
        }
    ),
]
"""A block hash in JSON: an integer, or a bytes hash as hex digits (read big-endian, exactly as the
ZMQ subscriber reads a bytes hash); never a boolean or a float. Beyond 64 bits, events and lookups
reduce it to the same 64-bit digest (litehit.attribution.events.block_digest)."""

Group = Annotated[int, Field(ge=0, le=MAX_GROUP, strict=True)]
"""A KV-cache group number (vLLM's group_idx)."""

EXAMPLE_EVENTS: JsonDict = {
    "epoch": "2026-12-01T04:00:00Z-pid4242",
    "seq": 0,
    "ts": 1764561600.25,
    "events": [
        {"type": "stored", "block_hashes": [1001, 1002, 1003]},
        {"type": "removed", "block_hashes": [1002]},
    ],
}


class EventBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["stored", "removed", "cleared"] = Field(
        description="stored: the blocks became resident; removed: they were evicted; cleared: every resident block "
        "was dropped, in every group (a prefix-cache reset; block_hashes empty)"
    )
    block_hashes: list[BlockHash] = Field(
        default=[],
        description="the blocks' hashes as the engine reports them: integers, or bytes hashes as hex strings "
        "(beyond 64 bits both are reduced to a 64-bit digest, the same way as in lookups)",
    )
    group: Group | None = Field(
        default=None,
        description="the KV-cache group of the blocks (vLLM's group_idx: full attention, sliding window, Mamba "
        "state, ... of a hybrid model); absent: group 0, an engine's only group when it names none",
    )
    group_kind: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="on a stored event: what kind of cache its group is (vLLM's kv_cache_spec_kind: full_attention, "
        "sliding_window, mamba, ...); a lookup without a group asks about the full-attention one",
    )

    @model_validator(mode="after")
    def _fields_of_the_type(self) -> EventBody:
        if self.type == "cleared" and (self.block_hashes or self.group is not None):
            raise ValueError("a cleared event takes no block_hashes and no group (it clears every group)")
        if self.group_kind is not None and self.type != "stored":
            raise ValueError("group_kind is declared by stored events only")
        return self

    def event(self) -> BlockEvent:
        kind = self.group_kind.lower() if self.group_kind else None
        return BlockEvent(EventType(self.type), tuple(self.block_hashes), self.group, kind)


class EventBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [EXAMPLE_EVENTS]})

    epoch: str = Field(
        min_length=1,
        max_length=255,
        description="one life of the worker process: a new epoch is a restart, and evidence never crosses it",
    )
    seq: int = Field(
        ge=0,
        le=2**63 - 1,
        strict=True,
        description="the batch's number within its epoch: +1 per batch; a jump is a gap (a batch ahead of a missing "
        "one is held for LITEHIT_ATTRIBUTION_REORDER_GRACE_S first)",
    )
    ts: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="the worker's wall clock when it emitted the batch, in seconds since 1970 (consumer lag is "
        "measured from it); absent: the owner's clock when the batch arrives",
    )
    events: list[EventBody] = Field(description="the batch's events, in the order the worker emitted them")

    def batch(self, default_ts: float) -> EventBatch:
        ts = default_ts if self.ts is None else self.ts
        return EventBatch(self.epoch, self.seq, ts, tuple(e.event() for e in self.events))


class LookupBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"worker": "vllm-0", "block_hash": 1002},
                {
                    "worker": "vllm-0",
                    "block_hash": "9f86d081884c7d659a2feaa0c55ad015",
                    "block_index": 7,
                    "lookup_limit": 7,
                },
            ]
        },
    )

    worker: str = Field(pattern=WORKER_PATTERN, description="the worker the request was routed to")
    block_hash: BlockHash = Field(description="the hash of the request's first uncached block, as in the events")
    group: Group | None = Field(
        default=None,
        description="the KV-cache group to ask about (vLLM's group_idx); absent: the worker's full-attention group",
    )
    block_index: int | None = Field(
        default=None,
        ge=0,
        strict=True,
        description="the position of the first uncached block in the request (0: its first block); with lookup_limit",
    )
    lookup_limit: int | None = Field(
        default=None,
        ge=0,
        strict=True,
        description="how many blocks of the request the engine probed (vLLM recomputes the last prompt token, so a "
        "prompt of whole blocks probes one block fewer); a block_index at or beyond it is not a miss",
    )

    @model_validator(mode="after")
    def _limit_comes_with_the_position(self) -> LookupBody:
        if (self.block_index is None) != (self.lookup_limit is None):
            raise ValueError("block_index and lookup_limit come together (or neither)")
        return self

    def lookup(self) -> Lookup:
        return Lookup(self.worker, self.block_hash, self.group, self.block_index, self.lookup_limit)


class LookupBatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"lookups": [{"worker": "vllm-0", "block_hash": 1002}, {"worker": "vllm-1", "block_hash": 7}]}]
        },
    )

    lookups: list[LookupBody] = Field(
        min_length=1, max_length=BATCH_MAX, description=f"answered in order (at most {BATCH_MAX:,})"
    )


class AttributionResult(BaseModel):
    outcome: Outcome = Field(
        description="resident: the block is there (lookup or routing trouble); evicted: a recent eviction (or a "
        "prefix-cache reset: cause 'reset') on this worker explains the miss; no_recent_match: absent, and the "
        "window's evidence is complete; not_a_miss: the block lies at or beyond the engine's lookup limit (it was "
        "never probed); unknown: the evidence cannot support a definite answer (gap, restart, lag, evidence pending "
        "a reordered batch, history shorter than the window, unknown worker or group)"
    )
    cause: Cause = Field(
        description="why, as a code (the `cause` label of litehit_attribution_lookups_total): resident; evicted, "
        "reset; absent; beyond_lookup_limit; for unknown: no_events, other_shard, disconnected, pending, lag, "
        "group_unknown, gap, short_history, resident_set_unknown, aged, owner_unreachable"
    )
    reason: str = Field(description="why, in words")
    evicted_at: float | None = Field(description="for evicted: the ts of the batch that removed the block")
    group: int | None = Field(description="the KV-cache group the answer is about (None: not established)")
    group_kind: str | None = Field(description="that group's kind, as the worker's stored events declared it")
