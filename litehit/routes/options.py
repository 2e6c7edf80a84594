"""The options of a routing what-if, validated once for the CLI and the API."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from litehit.tiers.config import parse_capacity

__all__ = ["REPLICAS_MAX", "STATE_DEPENDENT", "STATE_FREE", "THRESHOLD_DECIMALS", "Router", "RoutesOptions"]

REPLICAS_MAX = 1024
THRESHOLD_DECIMALS = 9  # the balance threshold is an exact decimal: at most this many places


class Router(StrEnum):
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"
    SESSION = "session"
    PREFIX_HASH = "prefix_hash"
    LEAST_LOADED = "least_loaded"
    CACHE_AWARE = "cache_aware"


STATE_FREE = (Router.ROUND_ROBIN, Router.RANDOM, Router.SESSION, Router.PREFIX_HASH)
"""Routers that never look at cache state: every replica is a lane with capacity-independent facts."""
STATE_DEPENDENT = (Router.LEAST_LOADED, Router.CACHE_AWARE)
"""Routers that read the replicas' loads (and cache contents): simulated at each asked capacity."""


class RoutesOptions(BaseModel):
    """N identical replicas (the config's one instance each), the routers compared and the
    per-replica capacities reported (the state-free routers' curve covers every capacity; the
    state-dependent routers run at these capacities only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replicas: Annotated[int, Field(ge=1, le=REPLICAS_MAX, description="replicas in the pool")]
    routers: list[Router] = Field(
        default_factory=lambda: list(STATE_FREE),
        min_length=1,
        description="routers compared, in this order (default: the four state-free ones)",
    )
    capacities: list[str] = Field(
        default_factory=list,
        max_length=64,
        validate_default=True,
        description="per-replica capacities: GiB (1, 512MiB), 20000blocks, 1Mtokens or inf "
        "(needed by least_loaded and cache_aware)",
    )
    seed: Annotated[int, Field(ge=0, lt=1 << 64, description="seed of the random router (SplitMix64)")] = 0
    prefix_blocks: Annotated[int, Field(ge=1, le=1 << 20, description="prefix_hash: blocks of the hashed prefix")] = 1
    load_window_s: Annotated[
        float,
        Field(
            ge=1e-9,
            le=10**9,
            allow_inf_nan=False,
            description="seconds: the load window of least_loaded and cache_aware, and of the p99 imbalance",
        ),
    ] = 10.0
    balance_threshold: Annotated[
        float,
        Field(
            ge=0,
            le=1000,
            allow_inf_nan=False,
            description="cache_aware: route to the least-loaded replica when the cache-best one's load is "
            "above (1 + this) x the mean load (an exact decimal, at most 9 places)",
        ),
    ] = 0.1

    @field_validator("routers")
    @classmethod
    def _once(cls, value: list[Router]) -> list[Router]:
        twice = sorted({r.value for r in value if value.count(r) > 1})
        if twice:
            raise ValueError(f"router {', '.join(twice)} given twice")
        return value

    @field_validator("capacities")
    @classmethod
    def _capacities(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for i, text in enumerate(value):
            parse_capacity(text, f"capacities[{i}]")
        simulated = [r.value for r in info.data.get("routers", []) if r in STATE_DEPENDENT]
        if simulated and not value:
            one = len(simulated) == 1
            raise ValueError(
                f"{' and '.join(simulated)} read{'s' if one else ''} the replicas' load and cache state, so "
                f"{'it runs' if one else 'they run'} at fixed per-replica capacities: give at least one capacity"
            )
        return value

    @field_validator("balance_threshold")
    @classmethod
    def _decimal(cls, value: float) -> float:
        exponent = Decimal(repr(value)).as_tuple().exponent
        if isinstance(exponent, int) and exponent < -THRESHOLD_DECIMALS:
            raise ValueError(f"at most {THRESHOLD_DECIMALS} decimal places (it is compared exactly), got {value!r}")
        return value

    @property
    def window_ns(self) -> int:
        """The window in whole nanoseconds (the decimal seconds as written, rounded)."""
        return max(1, round(Fraction(repr(self.load_window_s)) * 10**9))

    @property
    def threshold(self) -> Fraction:
        """The balance threshold as the exact decimal it was written as (0.1 is 1/10)."""
        return Fraction(repr(self.balance_threshold))

    @property
    def state_free(self) -> list[Router]:
        return [r for r in self.routers if r in STATE_FREE]

    @property
    def simulated(self) -> list[Router]:
        return [r for r in self.routers if r in STATE_DEPENDENT]
