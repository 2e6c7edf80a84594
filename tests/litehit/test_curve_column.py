"""IntColumn, the curve's breakpoint columns: reads as a sequence of Python ints, whether it holds
an int64 array or (values beyond int64) a list."""

from __future__ import annotations

import bisect
import json

import numpy as np

from litehit.curve import IntColumn


def test_an_array_column_reads_as_python_ints() -> None:
    values = [0, 3, 7, 7 * 2**40]
    col = IntColumn(np.array(values, dtype=np.int64))
    assert len(col) == 4 and col == values and list(col) == values
    assert type(col[1]) is int and col[-1] == 7 * 2**40
    assert col[1:3] == [3, 7] and type(col[1:3][0]) is int
    assert json.dumps(list(col)) == json.dumps(values)
    assert bisect.bisect_right(col, 6) == 2
    assert np.asarray(col, dtype=np.float64).tolist() == [float(v) for v in values]
    assert col != [0, 3, 7] and col != [0, 3, 7, 1]


def test_a_list_column_keeps_values_beyond_int64() -> None:
    values = [0, 2**64 - 1]
    col = IntColumn(values)
    assert col[1] == 2**64 - 1 and list(col) == values and col[:1] == [0]


def test_iteration_goes_in_pieces_past_64_ki_values() -> None:
    n = (1 << 16) * 2 + 5
    col = IntColumn(np.arange(n, dtype=np.int64))
    assert sum(1 for _ in col) == n and list(col)[-1] == n - 1
