"""What a policy sweep asks for: policies, capacities and the WA parameters (validated here, so
the CLI and the API reject the same input with the same field names)."""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from litehit.capacity import GIB, capacity_blocks, parse_capacities
from litehit.errors import ConfigError, ConfigIssue, QueryError
from litehit.policies.names import POLICY_CHOICES, POLICY_NAMES, PolicyName
from litehit.spec import ReplaySpec, config_error

__all__ = [
    "POLICY_CHOICES",
    "POLICY_NAMES",
    "Capacity",
    "PolicyName",
    "SweepOptions",
    "capacity_gib",
    "check_sweepable",
    "lane_capacity_blocks",
    "parse_sweep_options",
]


def _finite_positive(value: float, what: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0")
    return value


def _capacity_of_text(value: object) -> object:
    """A capacity given as text: a plain number is GiB (a float, as before), a byte unit (512MiB,
    1.5TiB) its exact GiB, blocks and tokens their canonical text (``20000blocks``,
    ``1000000tokens``: their bytes depend on the lane). Other values pass on."""
    if not isinstance(value, str):
        return value
    if _PLAIN.fullmatch(value):
        return float(value)
    try:
        (slot,) = parse_capacities([value])
    except QueryError as exc:
        raise ValueError(str(exc)) from None
    return str(slot.recorded_gb) if slot.per_lane else slot.capacity_gb


def _capacity(value: float | str) -> float | str:
    if isinstance(value, str):  # canonical blocks or tokens (see _capacity_of_text)
        (slot,) = parse_capacities([value])
        if not slot.per_lane or slot.count <= 0:
            raise ValueError(f"a capacity in {slot.unit} must be > 0")
        return value
    return _finite_positive(value, "a capacity_gb")


_PLAIN = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf(inity)?|nan)\s*", re.IGNORECASE)
Capacity = Annotated[float | str, BeforeValidator(_capacity_of_text), AfterValidator(_capacity)]
"""A capacity > 0: binary GiB (a number, or text with a byte unit: exact below 8 PiB, where GiB as
a double still holds every byte), or a number of blocks or tokens per lane (``20000blocks``:
exactly that many blocks; ``1Mtokens``: floor(tokens / the lane's block size) blocks, as a
query reads it), kept as its canonical text."""


def lane_capacity_blocks(capacity: float | str, block_bytes: int, block_size: int) -> int:
    """The blocks a lane (block_bytes bytes, block_size tokens per block) holds at a validated
    capacity: GiB by the projector's rule, blocks as given, tokens // block_size."""
    if isinstance(capacity, str):
        (slot,) = parse_capacities([capacity])
        blocks = slot.blocks(block_bytes, block_size)
    else:
        blocks = capacity_blocks(capacity, block_bytes)
    assert blocks is not None  # validated capacities are finite
    return blocks


def capacity_gib(capacity: float | str, blocks: int, block_bytes: int) -> float:
    """The capacity in GiB on a lane: as given, or (blocks, tokens) its blocks' bytes."""
    return capacity if isinstance(capacity, float) else blocks * block_bytes / GIB


class SweepOptions(BaseModel):
    """A sweep: every policy at every capacity, on every lane of the replay spec."""

    model_config = ConfigDict(extra="forbid")

    policies: list[PolicyName] = Field(
        default_factory=lambda: list(POLICY_NAMES),
        min_length=1,
        max_length=len(POLICY_NAMES),
        description="policies to simulate, each once (default: all)",
    )
    capacity_gb: list[Capacity] = Field(
        min_length=1,
        max_length=64,
        description="each > 0: binary GiB (a number, or 512MiB, 1.5TiB), or per lane 20000blocks, 1Mtokens",
    )
    wa_life_seconds: float | None = Field(
        default=None, description="WA prediction horizon; default: the p90 of the reuse times before the first fit"
    )
    wa_fit_window_seconds: float = Field(default=3600.0, description="WA fits the reuse times of this last span")
    wa_refit_seconds: float = Field(default=600.0, description="WA refits this often (trace time)")
    verify_lru: bool = Field(
        default=False, description="also replay the exact lane core and compare its facts with the LRU column"
    )

    @field_validator("wa_life_seconds")
    @classmethod
    def _life(cls, value: float | None) -> float | None:
        return None if value is None else _finite_positive(value, "wa_life_seconds")

    @field_validator("wa_fit_window_seconds", "wa_refit_seconds")
    @classmethod
    def _seconds(cls, value: float) -> float:
        _finite_positive(value, "the value")
        if value * 1e9 < 1 or value > 4e9:
            raise ValueError("must be between 1 ns and 4e9 seconds")
        return value

    @field_validator("policies")
    @classmethod
    def _unique(cls, values: list[PolicyName]) -> list[PolicyName]:
        seen = [p for i, p in enumerate(values) if p in values[:i]]
        if seen:
            raise ValueError(f"policy {seen[0]} is listed twice")
        return values

    @model_validator(mode="after")
    def _verify_needs_lru(self) -> SweepOptions:
        if self.verify_lru and "lru" not in self.policies:
            raise ValueError("verify_lru compares the lru column: include lru in policies")
        return self


def parse_sweep_options(data: object) -> SweepOptions:
    """Validated options; ConfigError names each bad field and value."""
    try:
        return SweepOptions.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc) from None


def check_sweepable(spec: ReplaySpec) -> None:
    """Policies model no TTL in this version: a lane with a TTL is a ConfigError naming it."""
    issues = []
    for i, inst in enumerate(spec.instances):
        ttl_ns = spec.group_of(inst).ttl_ns
        if ttl_ns:
            issues.append(
                ConfigIssue(
                    f"instances[{i}]",
                    inst.instance_id,
                    f"lane {inst.instance_id} has a TTL of {ttl_ns / 1e9:g} s: eviction-policy sweeps model no "
                    "TTL; use a group with ttl_seconds 0",
                )
            )
    if issues:
        raise ConfigError(issues)
