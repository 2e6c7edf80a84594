"""Bodies of the online owner's own routes (api/online.py), and the instance id of their paths.
Groups and instances are registered with the original configs (litehit.spec.InstanceGroup,
InstanceInfo); the public API checks the same models and forwards every body unchanged
(api/routes/online.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from api.examples import ONLINE_INSTANCE
from litehit.limits import BATCH_MAX, NAME_MAX

__all__ = ["InstanceId", "TraceQueryBatch", "TraceQueryBody"]

InstanceId = Annotated[
    str, Path(max_length=NAME_MAX, description="the instance's instance_id", examples=[ONLINE_INSTANCE])
]


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

    requests: list[TraceQueryBody] = Field(
        min_length=1, max_length=BATCH_MAX, description=f"applied in order (at most {BATCH_MAX:,})"
    )
