"""The shape of ``routes.json`` (a documented pydantic schema; ``RoutesResult.model_json_schema()``,
printed by ``litehit routes --schema``). litehit.routes.document builds it; the tests validate every
document they make against it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from litehit.routes.options import Router, RoutesOptions

__all__ = ["CapacityNumbers", "Curve", "Imbalance", "ReplicaNumbers", "RouterEntry", "RoutesResult"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Imbalance(_Strict):
    max_over_mean: float = Field(description="the busiest replica's prefill tokens over the trace / the mean")
    p99_over_mean: float = Field(
        description="nearest-rank p99, over the windows floor(timestamp_ns / W) holding a request, of that ratio"
    )


class ReplicaNumbers(_Strict):
    replica: int = Field(description="the replica, from 0 (lane r<replica> of the facts)")
    requests: int
    input_tokens: int
    hit_tokens: int = Field(description="hit blocks x block size")
    prefill_tokens: int = Field(description="input_tokens - hit_tokens")
    hit_rate: float = Field(description="hit_tokens / input_tokens (0 without input)")


class CapacityNumbers(_Strict):
    capacity: str = Field(description="the per-replica capacity as asked")
    capacity_blocks: int | None = Field(description="that capacity in blocks (null: unbounded)")
    hit_rate: float = Field(description="sum of hit tokens / sum of input tokens over all replicas")
    hit_tokens: int
    input_tokens: int
    imbalance: Imbalance
    replicas: list[ReplicaNumbers]
    vs_round_robin: float | None = Field(description="hit_rate - round_robin's at this capacity (null without it)")


class Curve(_Strict):
    input_tokens: int = Field(description="input tokens of all requests")
    capacity_blocks: list[int] = Field(description="per-replica capacities where the hits change, from 0")
    hit_tokens: list[int] = Field(description="the aggregate hit tokens from capacity_blocks[i] on")


class RouterEntry(_Strict):
    router: Router
    facts: str | None = Field(description="the per-replica facts file (state-free routers), beside routes.json")
    capacities: list[CapacityNumbers] = Field(description="one per asked capacity, in order")
    curve: Curve | None = Field(description="state-free routers: the exact aggregate curve; else null")


class TraceNumbers(_Strict):
    format: str
    reads: int
    blocks: int


class RoutesResult(_Strict):
    replicas: int
    options: RoutesOptions
    routers: list[RouterEntry] = Field(description="in the order asked")
    definitions: dict[str, str]
    notes: list[str]
    trace: TraceNumbers
