"""Capacity slots of a query: the list as given (order, duplicates and 0 kept; negative =
infinite), parsed like strtod, converted to bytes exactly. No engine imports: the API uses it to
validate requests."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from litehit.errors import QueryError

__all__ = ["DEFAULT_TARGETS", "GIB", "CapacitySlot", "parse_capacities"]

GIB = 1 << 30
DEFAULT_TARGETS = (0.5, 0.9, 0.95, 0.99)  # fractions of the infinite-capacity hit rate
U64_MAX = (1 << 64) - 1
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
    def capacity_bytes(self) -> int:
        """floor(gb * 1024^3), exact (scaling a double by 2^30 loses nothing)."""
        if self.infinite:
            return U64_MAX
        return min(math.floor(self.capacity_gb * GIB), U64_MAX)

    def blocks(self, block_bytes: int) -> int | None:
        return None if self.infinite else self.capacity_bytes // block_bytes


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
