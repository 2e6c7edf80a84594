"""What a window sizing asks for, validated here so that the CLI and a service reject the same
input with the same field names (the CLI turns a field into its flag: ``entry_bytes`` ->
``--entry-bytes``)."""

from __future__ import annotations

import math
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from litehit.policies.options import POLICY_CHOICES, Capacity, PolicyName
from litehit.spec import config_error

__all__ = ["EstimateOptions", "WindowOptions", "parse_estimate_options", "parse_window_options"]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _positive(value: float) -> float:
    if _finite(value) <= 0:
        raise ValueError("must be a finite number > 0")
    return value


def _non_negative(value: float) -> float:
    if _finite(value) < 0:
        raise ValueError("must be a finite number >= 0")
    return value


def _fraction(value: float) -> float:
    if not 0 < value <= 1:
        raise ValueError("must be in (0, 1]")
    return value


def _bucket(value: float) -> float:
    if _positive(value) * 1e9 < 1 or value > 4e9:
        raise ValueError("must be between 1 ns and 4e9 seconds")
    return value


M = TypeVar("M", bound=BaseModel)
Fraction01 = Annotated[float, AfterValidator(_fraction)]
PositiveFloat = Annotated[float, AfterValidator(_positive)]
NonNegativeFloat = Annotated[float, AfterValidator(_non_negative)]


class EstimateOptions(BaseModel):
    """The memory estimate alone: E x W x S / L."""

    model_config = ConfigDict(extra="forbid")

    evictions_per_s: NonNegativeFloat = Field(description="E: peak evictions per second")
    window_s: NonNegativeFloat = Field(description="W: retention window in seconds")
    entry_bytes: PositiveFloat = Field(default=24.0, description="S: measured bytes per stored entry")
    load_factor: Fraction01 = Field(default=0.8, description="L: target hash-table load factor, in (0, 1]")


class WindowOptions(BaseModel):
    """A sizing: every lane simulated at capacity_gb under policy (WA with its default parameters:
    horizon derived at the first fit, fit window 3600 s, refit every 600 s)."""

    model_config = ConfigDict(extra="forbid")

    policy: PolicyName = Field(default="lru", description=POLICY_CHOICES)
    capacity_gb: Capacity = Field(
        description="> 0: binary GiB (a number, or 512MiB, 1.5TiB), or per lane 20000blocks, 1Mtokens"
    )
    coverage: Fraction01 = Field(default=0.99, description="target share of evicted misses the window covers")
    entry_bytes: PositiveFloat = Field(default=24.0, description="S: measured bytes per stored entry")
    load_factor: Fraction01 = Field(default=0.8, description="L: target hash-table load factor, in (0, 1]")
    bucket_seconds: Annotated[float, AfterValidator(_bucket)] = Field(
        default=10.0, description="width of one ring bucket (expiry granularity)"
    )


def _validated(model: type[M], data: object) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc) from None


def parse_window_options(data: object) -> WindowOptions:
    """Validated options; ConfigError names each bad field and value."""
    return _validated(WindowOptions, data)


def parse_estimate_options(data: object) -> EstimateOptions:
    """Validated options; ConfigError names each bad field and value."""
    return _validated(EstimateOptions, data)
