"""Bodies of the online owner's own routes (api/online.py), and the instance id of their paths.
Groups and instances are registered with the original configs (litehit.spec.InstanceGroup,
InstanceInfo); the public API checks the same models and forwards every body unchanged
(api/routes/online.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from api.examples import ONLINE_INSTANCE
from litehit.capacity import CapacitySlot
from litehit.limits import BATCH_MAX, CAPACITIES_MAX, NAME_MAX
from litehit.tiers.config import TIERS_MAX, TierError, check_tier_names, parse_assignment, parse_capacity

__all__ = ["CurveParams", "InstanceId", "TraceQueryBatch", "TraceQueryBody", "curve_request"]

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


class CurveParams(BaseModel):
    """What to answer from an instance's live curve (query parameters, each may repeat)."""

    model_config = ConfigDict(extra="forbid")

    capacity: list[str] = Field(
        default_factory=list, max_length=CAPACITIES_MAX, description="capacities to answer: 4GiB, 20000blocks, inf"
    )
    tier: list[str] = Field(
        default_factory=list, max_length=TIERS_MAX, description="a tier split, first = HBM: hbm=4GiB, dram=inf"
    )
    mode: Literal["exclusive", "inclusive"] = Field(default="exclusive", description="how the tiers share blocks")
    points: int = Field(default=256, ge=2, le=4096, description="breakpoints shown at most (evenly spaced in hits)")


def curve_request(params: CurveParams) -> tuple[list[CapacitySlot], list[tuple[str, CapacitySlot]]]:
    """The capacities and tiers asked (422 naming the parameter otherwise)."""
    from api.errors import ApiError

    try:
        capacities = [parse_capacity(text, f"capacity[{i}]") for i, text in enumerate(params.capacity)]
        tiers = [parse_assignment(text, f"tier[{i}]") for i, text in enumerate(params.tier)]
        if tiers:
            check_tier_names([name for name, _ in tiers], "tier")
        slots = [(name, parse_capacity(value, f"tier[{i}]")) for i, (name, value) in enumerate(tiers)]
        if any(slot.infinite for _, slot in slots[:-1]):
            raise TierError("tier", "only the last tier can be infinite")
    except TierError as exc:
        raise ApiError(
            422, "validation_error", str(exc), details=[{"loc": ["query", exc.where], "msg": exc.message}]
        ) from None
    return capacities, slots
