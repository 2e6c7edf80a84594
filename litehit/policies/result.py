"""The shape of ``policies.json`` (a documented pydantic schema; ``PolicySweepResult.model_json_schema()``)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "LaneSweep",
    "LruCheck",
    "PolicyResult",
    "PolicySweepResult",
    "WaLane",
    "WaSettings",
    "drop_gib_capacity",
]


PER_LANE_CAPACITY = "the capacity as asked when in blocks or tokens (20000blocks, 1000000tokens); absent for GiB"


def drop_gib_capacity(rows: list[dict[str, Any]]) -> None:
    """Leaves ``capacity`` out of result rows at a capacity in GiB (it is null there), so that
    the JSON of a sweep or sizing in GiB keeps its bytes; rows per lane keep it."""
    for row in rows:
        if row.get("capacity", "") is None:
            del row["capacity"]


class PolicyResult(BaseModel):
    """One simulation: a lane under one policy at one capacity."""

    policy: str
    capacity_gb: float = Field(description="binary GiB (for a capacity in blocks or tokens: capacity_blocks' bytes)")
    capacity: str | None = Field(default=None, description=PER_LANE_CAPACITY)
    capacity_blocks: int = Field(
        description="trunc(capacity_gb x 1024^3 / block_bytes), the projector's rule; blocks as asked; "
        "tokens // block_size"
    )
    requests: int
    hit_blocks: int = Field(description="prefix hit blocks, summed over requests")
    hit_tokens: int = Field(description="hit blocks x block_size per request, summed (the query's rule)")
    input_tokens: int
    hit_ratio: float = Field(description="hit_tokens / input_tokens (0 when there are no input tokens)")
    evictions: int


class WaLane(BaseModel):
    """What the WA policy learnt on a lane (the same at every capacity: observations are made at
    trace level)."""

    life_s: float = Field(description="the prediction horizon used (given, or derived at the first fit)")
    fits: int
    rates_per_s: dict[str, float] = Field(description="fitted exponential reuse rate per category, at the end")
    rate_all_per_s: float = Field(description="the all-categories rate (used by categories never fitted); 0 = none")


class LruCheck(BaseModel):
    """--verify-lru: the LRU simulation against the exact lane core's facts, request by request.
    Under the prefix contract they are equal; a request that breaks it (a key repeated in the
    request, or one key under two prefixes) has facts that are a lower bound of exact LRU."""

    comparisons: int = Field(description="requests x capacities compared")
    equal: int
    facts_lower: int = Field(description="comparisons where the facts are below the exact LRU (contract broken)")


class LaneSweep(BaseModel):
    lane: str = Field(description="the instance_id")
    block_size: int
    block_bytes: int
    results: list[PolicyResult] = Field(description="policy-major, capacities in the order asked")
    wa: WaLane | None = None
    lru_check: LruCheck | None = None


class WaSettings(BaseModel):
    life_s: float | None = Field(description="the horizon: as given, or (derived) the first lane's")
    life_derived: bool
    fit_window_s: float
    refit_s: float


class PolicySweepResult(BaseModel):
    lanes: list[LaneSweep]
    wa: WaSettings

    def json_bytes(self) -> bytes:
        """policies.json as written by the CLI and the service alike."""
        data = self.model_dump(mode="json")
        for lane in data["lanes"]:
            drop_gib_capacity(lane["results"])
        return json.dumps(data, indent=2).encode() + b"\n"
