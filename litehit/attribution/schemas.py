"""The documents of live attribution: a batch of one worker's KV events, a lookup of the first
uncached block of a request that missed, and its answer. The HTTP routes (api/attribution.py,
api/routes/attribution.py) and `litehit attribution replay` (one line of an event log each)
validate the same models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from litehit.attribution.events import BlockEvent, EventBatch, EventType

__all__ = ["WORKER_PATTERN", "AttributionResult", "EventBatchBody", "EventBody", "LookupBatch", "LookupBody"]

WORKER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$"
"""A worker name: letters, digits and _ . : - (starting with a letter or digit), at most 255
characters; the same names the ZMQ endpoint setting takes, and safe as one path segment."""

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
        "was dropped (block_hashes empty)"
    )
    block_hashes: list[int] = Field(
        default=[],
        description="the blocks' hashes as the engine reports them (integers; beyond 64 bits they are reduced to a "
        "64-bit digest, the same way as in lookups)",
    )

    @model_validator(mode="after")
    def _cleared_has_no_hashes(self) -> EventBody:
        if self.type == "cleared" and self.block_hashes:
            raise ValueError("a cleared event takes no block_hashes")
        return self


class EventBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [EXAMPLE_EVENTS]})

    epoch: str = Field(
        min_length=1,
        max_length=255,
        description="one life of the worker process: a new epoch is a restart, and evidence never crosses it",
    )
    seq: int = Field(
        ge=0, le=2**63 - 1, description="the batch's number within its epoch: +1 per batch; a jump is a gap"
    )
    ts: float = Field(
        allow_inf_nan=False, description="the worker's wall clock when it emitted the batch, in seconds since 1970"
    )
    events: list[EventBody] = Field(description="the batch's events, in the order the worker emitted them")

    def batch(self) -> EventBatch:
        return EventBatch(
            self.epoch,
            self.seq,
            self.ts,
            tuple(BlockEvent(EventType(e.type), tuple(e.block_hashes)) for e in self.events),
        )


class LookupBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"worker": "vllm-0", "block_hash": 1002}]}
    )

    worker: str = Field(pattern=WORKER_PATTERN, description="the worker the request was routed to")
    block_hash: int = Field(description="the hash of the request's first uncached block, as in the events")


class LookupBatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"lookups": [{"worker": "vllm-0", "block_hash": 1002}, {"worker": "vllm-1", "block_hash": 7}]}]
        },
    )

    lookups: list[LookupBody] = Field(min_length=1, description="answered in order")


class AttributionResult(BaseModel):
    outcome: Literal["resident", "evicted", "no_recent_match", "unknown"] = Field(
        description="resident: the block is there (lookup or routing trouble); evicted: a recent eviction on this "
        "worker explains the miss; no_recent_match: absent, and the window's evidence is complete; unknown: the "
        "evidence cannot support a definite answer (gap, restart, lag, history shorter than the window, unknown "
        "worker)"
    )
    reason: str = Field(description="why, in words")
    evicted_at: float | None = Field(description="for evicted: the ts of the batch that removed the block")
