"""What a window costs: the ring of time buckets and the memory estimate E x W x S / L (peak
evictions per second x window seconds x bytes per entry / hash-table load factor)."""

from __future__ import annotations

from dataclasses import dataclass

from litehit.capacity import format_seconds
from litehit.quantiles import NS_PER_S, decimal

__all__ = ["FIFTEEN_MINUTES_S", "MemoryEstimate", "human_bytes", "ring_buckets"]

FIFTEEN_MINUTES_S = 900.0
_UNITS = ((1 << 40, "TiB", 2), (1 << 30, "GiB", 2), (1 << 20, "MiB", 1), (1 << 10, "KiB", 1))


def ring_buckets(window_ns: int, bucket_s: float) -> int:
    """ceil(window / bucket) buckets of bucket_s seconds (rounded to whole ns) hold a window."""
    bucket_ns = max(1, round(bucket_s * NS_PER_S))
    return -(-window_ns // bucket_ns)


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,}"


def human_bytes(n: float) -> str:
    """``171.7 MiB``, ``1.26 GiB``: binary units, one or two decimals."""
    for size, unit, digits in _UNITS:
        if n >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """E x W x S / L, computed exactly on the decimals given and rounded once."""

    evictions_per_s: float
    window_s: float
    entry_bytes: float
    load_factor: float

    def bytes_for(self, window_s: float) -> float:
        return float(
            decimal(self.evictions_per_s) * decimal(window_s) * decimal(self.entry_bytes) / decimal(self.load_factor)
        )

    @property
    def bytes(self) -> float:
        return self.bytes_for(self.window_s)

    @property
    def bytes_15min(self) -> float:
        return self.bytes_for(FIFTEEN_MINUTES_S)

    def describe(self) -> str:
        """Two lines: the estimate with its factors, and the 15-minute comparison. W is shown as
        people read a duration (format_seconds); where that rounds it, the product, computed from
        the exact W, reads "~="."""
        shown = format_seconds(self.window_s)
        exact = shown == f"{_number(self.window_s)} s"
        return (
            f"memory: {_number(self.evictions_per_s)} evictions/s x {shown} x "
            f"{_number(self.entry_bytes)} B / "
            f"{self.load_factor:g} {'=' if exact else '~='} {self.bytes:,.0f} B = {human_bytes(self.bytes)}\n"
            f"15 minutes: {self.bytes_15min:,.0f} B = {human_bytes(self.bytes_15min)}"
        )
