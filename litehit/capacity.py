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

__all__ = [
    "DEFAULT_TARGETS",
    "GIB",
    "UNITS_HELP",
    "CapacitySlot",
    "capacity_blocks",
    "counted",
    "format_bytes",
    "format_seconds",
    "parse_capacities",
]

GIB = 1 << 30
DEFAULT_TARGETS = (0.5, 0.9, 0.95, 0.99)  # fractions of the infinite-capacity hit rate
U64_MAX = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
_DECIMAL = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_INFINITY = re.compile(r"\s*\+?inf(inity)?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CapacitySlot:
    """One capacity of a query.

    - ``unit == "GiB"``: a plain number, binary GiB as the original reads it (negative or +inf:
      infinite), ``capacity_gb`` that number;
    - ``unit == "bytes"``: given with a byte unit (``512MiB``, ``1.5TiB``): ``count`` exact bytes,
      ``capacity_gb`` the same in GiB (for display);
    - ``unit == "blocks"`` / ``"tokens"``: ``count`` blocks, or tokens (floor(tokens / block size)
      blocks in each lane); ``capacity_gb`` is None: the bytes depend on the lane."""

    capacity_gb: float | None
    unit: str = "GiB"
    count: int = 0

    @property
    def infinite(self) -> bool:
        return (
            self.unit == "GiB"
            and self.capacity_gb is not None
            and (self.capacity_gb < 0 or math.isinf(self.capacity_gb))
        )

    @property
    def per_lane(self) -> bool:
        """True for blocks and tokens: a capacity whose bytes depend on the lane."""
        return self.unit in ("blocks", "tokens")

    @property
    def recorded_gb(self) -> float | str:
        """The capacity as a job records it in JSON (and parse_capacities reads back): the GiB
        number (-1.0 when infinite: JSON has no Infinity), or the exact text of a unit capacity."""
        if self.unit == "GiB":
            assert self.capacity_gb is not None
            return -1.0 if self.infinite else self.capacity_gb
        return f"{self.count}{'B' if self.unit == 'bytes' else self.unit}"

    @property
    def label(self) -> str:
        """``inf``, ``2 GiB``, ``512 MiB``, ``20,000 blocks``, ``1,000,000 tokens``."""
        if self.infinite:
            return "inf"
        if self.unit == "GiB":
            return f"{self.capacity_gb:g} GiB"
        if self.unit == "bytes":
            return format_bytes(self.count)
        return counted(self.count, self.unit.removesuffix("s"))

    @property
    def capacity_bytes(self) -> int:
        """Bytes: floor(gb x 1024^3) exactly, or the given bytes, saturating at 2^64 - 1 (also the
        infinite slot's value). ValueError for blocks and tokens (their bytes depend on the lane)."""
        if self.per_lane:
            raise ValueError(f"a capacity of {self.label} has no bytes of its own")
        if self.infinite:
            return U64_MAX
        if self.unit == "bytes":
            return min(self.count, U64_MAX)
        assert self.capacity_gb is not None
        return min(_exact_bytes(self.capacity_gb), U64_MAX)

    def blocks(self, block_bytes: int, block_size: int = 1) -> int | None:
        """Capacity in blocks of block_bytes bytes and block_size tokens (None when infinite)."""
        if self.infinite:
            return None
        if self.unit == "blocks":
            return min(self.count, INT64_MAX)
        if self.unit == "tokens":
            return min(self.count // block_size, INT64_MAX)
        if self.unit == "GiB":
            assert self.capacity_gb is not None
            return capacity_blocks(self.capacity_gb, block_bytes)
        if block_bytes <= 0:
            raise ValueError("block_bytes must be positive")
        return min(self.count // block_bytes, INT64_MAX)


def counted(n: int, noun: str) -> str:
    """``1 block``, ``20,000 blocks``: a count with its noun, singular for exactly one."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def format_seconds(seconds: float) -> str:
    """A duration as people read it: whole seconds from 100 s on (``1,797 s``), else three
    significant digits (``14.6 s``, ``0.5 s``). Results files keep the exact values."""
    if seconds >= 100:
        return f"{seconds:,.0f} s"
    return f"{seconds:.3g} s"


def format_bytes(n: int) -> str:
    """A byte count in the largest binary unit (KiB .. TiB) that keeps it >= 1, 4 significant digits."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"


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


_BYTE_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50}
_DECIMAL_BYTE_UNITS = {"kb", "mb", "gb", "tb", "pb"}
_COUNT_PREFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
_WITH_UNIT = re.compile(r"\s*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*([a-zA-Z]+)\s*")
UNITS_HELP = (
    "a number of GiB, or a number with a unit: B, KiB, MiB, GiB, TiB, PiB, blocks, tokens (K/M/G prefixes: 1Mtokens)"
)


def _amount(match: re.Match[str]) -> Fraction:
    """The number exactly, saturating at 2^64 - 1 (larger than any cache at every unit); an
    exponent beyond +-60 is read as that saturation, or as 0 (below one byte, block or token)."""
    exponent = int(match.group(2)[1:]) if match.group(2) else 0
    mantissa = Fraction(match.group(1))
    if mantissa == 0 or exponent < -60:
        return Fraction(0)
    if exponent > 60:
        return Fraction(U64_MAX)
    return min(mantissa * Fraction(10) ** exponent, Fraction(U64_MAX))


def _with_unit(text: str, match: re.Match[str]) -> CapacitySlot:
    amount = _amount(match)
    unit = match.group(3).lower()
    if unit in _BYTE_UNITS:
        count = min(math.floor(amount * _BYTE_UNITS[unit]), U64_MAX)
        return CapacitySlot(count / GIB, "bytes", count)
    if unit in _DECIMAL_BYTE_UNITS:
        raise QueryError(f"invalid capacity {text}: capacities are binary, write {unit[0].upper()}iB")
    for name in ("blocks", "tokens"):
        prefix = unit.removesuffix(name)
        if unit.endswith(name) and prefix in _COUNT_PREFIXES:
            exact = amount * _COUNT_PREFIXES[prefix]
            if exact.denominator != 1:
                raise QueryError(f"invalid capacity {text}: a whole number of {name}")
            return CapacitySlot(None, name, min(int(exact), U64_MAX))
    raise QueryError(f"invalid capacity {text}: unknown unit {match.group(3)!r} ({UNITS_HELP})")


def parse_capacities(values: Sequence[str | float]) -> list[CapacitySlot]:
    """Capacities as given: order kept, duplicates and 0 allowed. A plain number is GiB read like
    strtod (decimal, optional sign/exponent, "inf"; negative = infinite), as the original does; a
    number with a unit (512MiB, 1.5TiB, 20000blocks, 1Mtokens) is exact. Anything else is
    rejected."""
    if not values:
        raise QueryError("at least one capacity_gb is required")
    slots = []
    for value in values:
        if isinstance(value, str):
            if _INFINITY.fullmatch(value):
                number = math.inf
            elif _DECIMAL.fullmatch(value):
                number = float(value)
            elif match := _WITH_UNIT.fullmatch(value):
                slots.append(_with_unit(value, match))
                continue
            else:
                raise QueryError(f"invalid capacity_gb: {value}")
        else:
            number = float(value)
        if math.isnan(number):
            raise QueryError(f"invalid capacity_gb: {value} (not a number)")
        slots.append(CapacitySlot(number))
    return slots
