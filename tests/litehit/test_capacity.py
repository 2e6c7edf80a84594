"""The one GiB -> bytes -> blocks conversion (litehit/capacity.py) against exact arithmetic and
the C projector's byte rule."""

from __future__ import annotations

import random
from decimal import Decimal, getcontext

import pytest

import core_c
from litehit.capacity import CapacitySlot, capacity_blocks

INT64_MAX = 2**63 - 1


def naive_blocks(gb: float, block_bytes: int) -> int:
    """trunc(gb x 1024^3 / block_bytes) in 400-digit decimal arithmetic (every double is exact there)."""
    getcontext().prec = 400
    value = Decimal(gb) * Decimal(1024) ** 3 / Decimal(block_bytes)
    return min(int(value), INT64_MAX)


@pytest.mark.parametrize(
    ("gb", "block_bytes", "expected"),
    [
        (0.0, 4096, 0),
        (1.0, 1 << 20, 1024),
        (1.0, 3, (1 << 30) // 3),
        (3.0517578125e-05, 4096, 8),  # 32 KiB: the query example's slot
        (2.0**-31, 1, 0),  # half a byte floors to zero bytes
        (1e300, 16384, INT64_MAX),  # saturates instead of overflowing the float scaling
        (1.7976931348623157e308, 1, INT64_MAX),
    ],
)
def test_known_values(gb: float, block_bytes: int, expected: int) -> None:
    assert capacity_blocks(gb, block_bytes) == expected
    assert CapacitySlot(gb).blocks(block_bytes) == expected


@pytest.mark.parametrize("gb", [-1.0, -0.5, float("inf")])
def test_negative_and_infinite_are_infinite(gb: float) -> None:
    assert capacity_blocks(gb, 4096) is None
    slot = CapacitySlot(gb)
    assert slot.infinite
    assert slot.capacity_bytes == 2**64 - 1


def test_block_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="block_bytes must be positive"):
        capacity_blocks(1.0, 0)


def test_random_capacities_match_exact_arithmetic_and_the_c_byte_rule() -> None:
    rng = random.Random(20261130)
    curve = [(1, 3), (5, 2), (40, 7), (1000, 1), (70000, 4)]  # thresholds where floors matter
    for _ in range(3000):
        block_bytes = rng.choice([1, 3, 4096, 16384, 131072 * 16, rng.randint(1, 1 << 40)])
        gb = rng.choice([rng.random() * 2.0 ** rng.randint(-40, 40), rng.randint(0, 1 << 20) / 7])
        blocks = capacity_blocks(gb, block_bytes)
        assert blocks == naive_blocks(gb, block_bytes), (gb, block_bytes)
        capacity_bytes = CapacitySlot(gb).capacity_bytes
        assert core_c.project_blocks(curve, blocks) == core_c.project_bytes(curve, capacity_bytes, block_bytes)
