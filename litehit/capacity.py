"""Capacities: parsing a query's list (order, duplicates and 0 kept; negative = infinite; read
like strtod) and the one conversion of a capacity in GiB to bytes and to blocks. No engine
imports: the API uses it to validate requests.

The conversion is the projector's rule: bytes = floor(gb x 1024^3), blocks = floor(bytes /
block_bytes), both exact (which equals trunc(gb x 1024^3 / block_bytes), the original online
rule). The query and miss reports hand the bytes to the C projector, which divides per row;
online slots and the what-if simulators use ``capacity_blocks``."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from litehit.errors import QueryError

__all__ = ["DEFAULT_TARGETS", "GIB", "CapacitySlot", "capacity_blocks", "parse_capacities"]

GIB = 1 << 30
DEFAULT_TARGETS = (0.5, 0.9, 0.95, 0.99)  # fractions of the infinite-capacity hit rate
U64_MAX = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
_DECIMAL = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_INFINITY = re.compile(r"\s*\+?inf(inity)?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CapacitySlot:
    """One capacity of a query: gb < 0 (or +inf) is infinite; otherwise binary GiB."""

    capacity_gb: float

    @property
    def infinite(self) -> bool:
        return self.capacity_gb < 0 or math.isinf(self.capacity_gb)

    @property
    def recorded_gb(self) -> float:
        """The capacity as a job records it in JSON: -1.0 when infinite (JSON has no Infinity)."""
        return -1.0 if self.infinite else self.capacity_gb

    @property
    def capacity_bytes(self) -> int:
        """floor(gb x 1024^3), exact, saturating at 2^64 - 1 (also the infinite slot's value)."""
        if self.infinite:
            return U64_MAX
        return min(_exact_bytes(self.capacity_gb), U64_MAX)

    def blocks(self, block_bytes: int) -> int | None:
        """Capacity in blocks of block_bytes (None when infinite); see capacity_blocks."""
        return capacity_blocks(self.capacity_gb, block_bytes)


def _exact_bytes(capacity_gb: float) -> int:
    return math.floor(Fraction(capacity_gb) * GIB)  # exact for every finite double, however large


def capacity_blocks(capacity_gb: float, block_bytes: int) -> int | None:
    """floor(floor(gb x 1024^3) / block_bytes), exact, saturating at INT64_MAX; None when the
    capacity is infinite (negative or +inf). block_bytes must be positive."""
    if block_bytes <= 0:
        raise ValueError("block_bytes must be positive")
    if capacity_gb < 0 or math.isinf(capacity_gb):
        return None
    return min(_exact_bytes(capacity_gb) // block_bytes, INT64_MAX)


def parse_capacities(values: Sequence[str | float]) -> list[CapacitySlot]:
    """Capacities as given: order kept, duplicates and 0 allowed, negative = infinite. Text is
    read like strtod (decimal, optional sign/exponent, "inf"); anything else is rejected."""
    if not values:
        raise QueryError("at least one capacity_gb is required")
    slots = []
    for value in values:
        if isinstance(value, str):
            if _INFINITY.fullmatch(value):
                number = math.inf
            elif _DECIMAL.fullmatch(value):
                number = float(value)
            else:
                raise QueryError(f"invalid capacity_gb: {value}")
        else:
            number = float(value)
        if math.isnan(number):
            raise QueryError(f"invalid capacity_gb: {value} (not a number)")
        slots.append(CapacitySlot(number))
    return slots
