"""Exact order statistics shared by the analyses: nearest-rank quantiles of sorted integer
nanoseconds, and fractions read as the decimals they print as.

Nearest rank: the q-quantile of n sorted values is the one at rank ceil(q x n) (at least 1), the
smallest value v with at least ceil(q x n) values <= v. A fraction given as a float (0.99) is read
as the decimal it prints as, so a rank is never one off because 0.1 is stored a hair above one
tenth."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = ["NS_PER_S", "decimal", "nearest_rank"]

NS_PER_S = 1_000_000_000


def decimal(value: float) -> Fraction:
    """The exact value of the shortest decimal that prints as value (0.1 -> 1/10)."""
    return Fraction(repr(float(value)))


def nearest_rank(sorted_values: npt.NDArray[np.int64], q: Fraction) -> int:
    """The q-quantile by nearest rank of ascending values. n > 0."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return int(sorted_values[rank - 1])
