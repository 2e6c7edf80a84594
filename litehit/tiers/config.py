"""Cache tiers as a user writes them: ``hbm=30GiB``, ``dram=512GiB``, ``ssd=inf`` (a configuration),
``dram=0..2TiB`` (a range the planner searches), and how they share the blocks (the mode).

A capacity is per instance, in any unit a query accepts (litehit.capacity): bytes units, blocks,
tokens, and ``inf`` for the last tier. No engine imports: the API validates requests with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from litehit.capacity import UNITS_HELP, CapacitySlot, parse_capacities
from litehit.errors import QueryError

__all__ = [
    "NAME_PATTERN",
    "TIERS_MAX",
    "TierError",
    "TierMode",
    "TierRange",
    "parse_assignment",
    "parse_capacity",
    "parse_range",
]

TIERS_MAX = 8
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


class TierError(QueryError, ValueError):
    """A tier written wrong: ``where`` names the flag or field, ``message`` the reason (a
    ValueError too, so a pydantic validator raising it makes a validation error)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class TierMode(StrEnum):
    EXCLUSIVE = "exclusive"  # one LRU order split across the tiers (demote on evict, promote on hit)
    INCLUSIVE = "inclusive"  # every tier an LRU over all accesses (write-through)


def parse_capacity(text: str | float, where: str) -> CapacitySlot:
    """One tier capacity: a number of GiB or a number with a unit, or ``inf``. A negative or NaN
    number is refused (a query reads negative as infinite; a tier says ``inf``)."""
    if isinstance(text, str) and not text.strip():
        raise TierError(where, "a tier needs a capacity (512GiB, 20000blocks, inf)")
    if isinstance(text, float | int) and not isinstance(text, bool):
        if math.isnan(text):
            raise TierError(where, "capacity is not a number")
        if text < 0:
            raise TierError(where, f"capacity {text:g} is negative (write inf for an unbounded tier)")
    elif isinstance(text, str):
        stripped = text.strip()
        if stripped.startswith("-"):
            raise TierError(where, f"capacity {stripped} is negative (write inf for an unbounded tier)")
    else:
        raise TierError(where, f"capacity must be a number or a string, got {type(text).__name__}")
    try:
        (slot,) = parse_capacities([text if isinstance(text, str) else float(text)])
    except QueryError as exc:
        raise TierError(where, f"{exc} ({UNITS_HELP})") from None
    return slot


@dataclass(frozen=True, slots=True)
class TierRange:
    """A tier of a plan: a fixed capacity (low == high) or a range low..high searched."""

    low: CapacitySlot
    high: CapacitySlot

    @property
    def fixed(self) -> bool:
        return self.low == self.high


def parse_range(text: str | float, where: str) -> TierRange:
    """``30GiB`` (fixed) or ``0..2TiB`` (ranged; both ends in any unit, the high end may be inf)."""
    if isinstance(text, str) and ".." in text:
        low_text, _, high_text = text.partition("..")
        low = parse_capacity(low_text, where)
        high = parse_capacity(high_text, where)
        if low.infinite:
            raise TierError(where, "a range cannot start at inf")
        return TierRange(low, high)
    slot = parse_capacity(text, where)
    return TierRange(slot, slot)


def parse_assignment(text: str, flag: str) -> tuple[str, str]:
    """``name=value`` of a repeated flag (``--tier hbm=30GiB``): the tier's name and the value."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep:
        raise TierError(flag, f"{text!r}: write NAME=VALUE (e.g. {flag} dram=512GiB)")
    check_name(name, flag)
    return name, value.strip()


def check_name(name: str, where: str) -> None:
    if not NAME_PATTERN.fullmatch(name):
        raise TierError(where, f"{name!r} is not a tier name (a letter, then letters, digits, _ or -, at most 32)")


def check_tier_names(names: Sequence[str], where: str) -> None:
    """Distinct valid names, 1 to TIERS_MAX of them."""
    if not names:
        raise TierError(where, "at least one tier is needed (the first is the GPU's HBM)")
    if len(names) > TIERS_MAX:
        raise TierError(where, f"{len(names)} tiers; at most {TIERS_MAX}")
    seen: set[str] = set()
    for name in names:
        check_name(name, where)
        if name in seen:
            raise TierError(where, f"tier {name!r} is given twice")
        seen.add(name)
