"""The shape of ``policies.json`` (a documented pydantic schema; ``PolicySweepResult.model_json_schema()``)."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

__all__ = ["LaneSweep", "LruCheck", "PolicyResult", "PolicySweepResult", "WaLane", "WaSettings"]


class PolicyResult(BaseModel):
    """One simulation: a lane under one policy at one capacity."""

    policy: str
    capacity_gb: float
    capacity_blocks: int = Field(description="trunc(capacity_gb x 1024^3 / block_bytes), the projector's rule")
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
        return json.dumps(self.model_dump(mode="json"), indent=2).encode() + b"\n"
