"""Prefix hash golden vectors and NormalizeRequest (spec §5, §6.1, RequestPreprocessTest)."""

from __future__ import annotations

import numpy as np
import pytest

import core_c
from core_c import CoreInvalidArgument, normalize, normalize_batch, prefix_hash, prefix_hash_next


@pytest.mark.parametrize(
    ("raw", "chained"),
    [
        ([1, 2, 3], [-7046029254386353130, -8366447756632839738, 8024461590772477417]),
        ([-5, 7], [-7046029254386353136, -8366447756632880699]),
        ([42], [-7046029254386353089]),
        ([], []),
        ([0, 0], [-7046029254386353131, -8366447756632835621]),
        ([9223372036854775807], [2177342782468422676]),
        ([-1, -1], [-7046029254386353132, -8366447756632831527]),
        ([123456789, 987654321, 5], [-7046029254262896342, -8366443884714870955, 8004346529214136546]),
        ([18446744073709551615], [-7046029254386353132]),
    ],
)
def test_prefix_hash_matches_python_golden_vectors(raw: list[int], chained: list[int]) -> None:
    assert prefix_hash(raw).tolist() == chained


def test_prefix_hash_step_and_fourth_key() -> None:
    assert prefix_hash_next(0, 0) == -7046029254386353131
    assert prefix_hash([1, 2, 3, 4]).tolist()[3] == 527151483457094799


def test_prefix_hash_matches_a_python_reference() -> None:
    def step(prev: int, raw: int) -> int:
        m = 2**64 - 1
        h, v = prev & m, raw & m
        out = h ^ ((v + 0x9E3779B97F4A7C15 + ((h << 12) & m) + (h >> 32)) & m)
        return out - 2**64 if out >= 2**63 else out

    rng = np.random.default_rng(3)
    raw = rng.integers(-(2**63), 2**63 - 1, size=500, dtype=np.int64)
    prev, want = 0, []
    for r in raw.tolist():
        prev = step(prev, r)
        want.append(prev)
    assert prefix_hash(raw).tolist() == want


@pytest.mark.parametrize(
    ("keys", "length", "block_size", "message"),
    [
        ([1], 3, 4, "must contain exactly floor"),
        ([], 4, 4, "must contain exactly floor"),
        ([1], -1, 4, "input_token_len must not be negative"),
        ([1], 4, 0, "block_size_tokens must be positive"),
    ],
)
def test_validates_length_contract(keys: list[int], length: int, block_size: int, message: str) -> None:
    with pytest.raises(CoreInvalidArgument, match=message):
        normalize(keys, length, block_size)


def test_accepts_tail_tokens_and_empty_requests() -> None:
    r = normalize([1], 7, 4)
    assert (r.keys.tolist(), r.input_len) == ([1], 7)
    r = normalize([], 0, 4)
    assert (r.keys.tolist(), r.input_len) == ([], 0)


def test_derives_missing_input_length_from_keys() -> None:
    assert normalize([1, 2, 3], 0, 4).input_len == 12


def test_applies_rolling_prefix_hash_when_enabled() -> None:
    r = normalize([1, 2, 3], 13, 4, prefix_hash=True)
    assert r.keys.tolist() == prefix_hash([1, 2, 3]).tolist()
    assert r.input_len == 13
    assert normalize([1, 2, 3], 13, 4).keys.tolist() == [1, 2, 3]


def test_reblocks_to_coarser_granularity() -> None:
    r = normalize([1, 2, 3, 4, 5], 21, 8, trace_block_size=4)
    assert (r.keys.tolist(), r.input_len) == ([2, 4], 21)
    r = normalize([1], 4, 8, trace_block_size=4)
    assert (r.keys.tolist(), r.input_len) == ([], 4)
    r = normalize([1, 2, 3, 4], 16, 8, trace_block_size=4, prefix_hash=True)
    assert r.keys.tolist() == [-8366447756632839738, 527151483457094799]
    with pytest.raises(CoreInvalidArgument, match="exactly floor"):
        normalize([1, 2], 21, 8, trace_block_size=4)
    with pytest.raises(CoreInvalidArgument, match=r"multiple of the trace block size \(coarsening only\)"):
        normalize([1], 4, 6, trace_block_size=4)
    with pytest.raises(CoreInvalidArgument, match="coarsening only"):
        normalize([1], 8, 4, trace_block_size=8)


def test_normalize_batch_with_row_selection_and_failure_index() -> None:
    keys = np.arange(1, 11, dtype=np.int64)
    offsets = np.array([0, 2, 6, 10], dtype=np.int64)
    lens = np.array([8, 16, 17], dtype=np.int64)
    out = normalize_batch(keys, offsets, lens, 8, rows=np.array([2, 0]), trace_block_size=4)
    assert out.keys.tolist() == [8, 10, 2]
    assert out.offsets.tolist() == [0, 2, 3]
    assert out.input_lens.tolist() == [17, 8]
    bad = np.array([8, 99, 16], dtype=np.int64)
    with pytest.raises(CoreInvalidArgument) as info:
        normalize_batch(keys, offsets, bad, 4)
    assert info.value.index == 1


def test_normalize_batch_equals_single_normalize() -> None:
    rng = np.random.default_rng(11)
    sizes = rng.integers(0, 9, size=200)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    keys = rng.integers(-(2**62), 2**62, size=int(offsets[-1]), dtype=np.int64)
    lens = (sizes * 4 + rng.integers(0, 4, size=200)).astype(np.int64)
    out = normalize_batch(keys, offsets, lens, 12, trace_block_size=4, prefix_hash=True)
    for i in range(200):
        one = core_c.normalize(
            keys[offsets[i] : offsets[i + 1]], int(lens[i]), 12, trace_block_size=4, prefix_hash=True
        )
        assert out.keys[out.offsets[i] : out.offsets[i + 1]].tolist() == one.keys.tolist()
        assert out.input_lens[i] == one.input_len
