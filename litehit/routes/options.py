"""The options of a routing what-if, validated once for the CLI and the API."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from litehit.tiers.config import parse_capacity

__all__ = ["REPLICAS_MAX", "STATE_DEPENDENT", "Router", "RoutesOptions"]

REPLICAS_MAX = 1024


class Router(StrEnum):
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"
    SESSION = "session"
    PREFIX_HASH = "prefix_hash"


STATE_DEPENDENT = ("least_loaded", "cache_aware")
"""Routers that read cache state or load: they need the fixed-capacity routing simulator, which
this version does not have yet (they are refused by name)."""


class RoutesOptions(BaseModel):
    """N identical replicas (the config's one instance each), the routers compared and the
    per-replica capacities reported (the curve covers every capacity)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replicas: Annotated[int, Field(ge=1, le=REPLICAS_MAX, description="replicas in the pool")]
    routers: list[Router] = Field(
        default_factory=lambda: list(Router), min_length=1, description="routers compared, in this order"
    )
    capacities: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="per-replica capacities: GiB (1, 512MiB), 20000blocks, 1Mtokens or inf",
    )
    seed: Annotated[int, Field(ge=0, lt=1 << 64, description="seed of the random router (SplitMix64)")] = 0
    prefix_blocks: Annotated[int, Field(ge=1, le=1 << 20, description="prefix_hash: blocks of the hashed prefix")] = 1
    load_window_s: Annotated[
        float, Field(gt=0, le=10**9, allow_inf_nan=False, description="window of the p99 load imbalance, seconds")
    ] = 10.0

    @field_validator("routers", mode="before")
    @classmethod
    def _known(cls, value: object) -> object:
        if isinstance(value, list):
            for name in value:
                if name in STATE_DEPENDENT:
                    raise ValueError(
                        f"router {name} depends on cache state and needs the fixed-capacity routing simulator, "
                        f"not built yet; the state-free routers are {', '.join(Router)}"
                    )
        return value

    @field_validator("routers")
    @classmethod
    def _once(cls, value: list[Router]) -> list[Router]:
        twice = sorted({r.value for r in value if value.count(r) > 1})
        if twice:
            raise ValueError(f"router {', '.join(twice)} given twice")
        return value

    @field_validator("capacities")
    @classmethod
    def _capacities(cls, value: list[str]) -> list[str]:
        for i, text in enumerate(value):
            parse_capacity(text, f"capacities[{i}]")
        return value

    @property
    def window_ns(self) -> int:
        return round(self.load_window_s * 1e9)
