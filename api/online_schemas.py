"""Bodies of the online owner's own routes (api/online.py). Groups and instances are registered
with the original configs (litehit.spec.InstanceGroup, InstanceInfo); the public API forwards
every body unchanged (api/routes/online.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TraceQueryBatch", "TraceQueryBody"]


class TraceQueryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    block_keys: list[int] = Field(
        description="full-block keys, front to back (prefix-chained, or raw hashes when the group has enable_prefix_hash)"
    )
    input_token_len: int | None = Field(
        default=None, ge=0, description="tokens of the request; missing: keys x block_size"
    )
    timestamp_ns: int | None = Field(default=None, ge=0, description="default: wall clock (TTL groups age by it)")


class TraceQueryBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[TraceQueryBody] = Field(min_length=1, description="applied in order")
