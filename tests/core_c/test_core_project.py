"""The projector (HitCurveProjectorTest) and its agreement with a brute-force definition."""

from __future__ import annotations

import random

import pytest

from core_c import project_blocks, project_bytes, project_infinite


def test_empty_curve_hits_nothing() -> None:
    assert project_blocks([], 0) == 0
    assert project_blocks([], 10**6) == 0
    assert project_infinite([]) == 0


def test_projects_segment_boundaries() -> None:
    curve = [(1, 2), (4, 1)]
    assert [project_blocks(curve, c) for c in [0, 1, 2, 3, 4, 100]] == [0, 1, 2, 2, 3, 3]
    assert project_infinite(curve) == 3


def test_byte_projection_floors_capacity() -> None:
    curve = [(2, 3)]
    assert project_bytes(curve, 2 * 4096 - 1, 4096) == 0
    assert project_bytes(curve, 2 * 4096, 4096) == 1
    assert project_bytes(curve, 4 * 4096 - 1, 4096) == 2
    assert project_bytes(curve, 4 * 4096, 4096) == 3


def test_huge_capacities_saturate_to_infinite() -> None:
    curve = [(1, 2), (2**40, 5)]
    assert project_blocks(curve, 2**70) == 7
    assert project_bytes(curve, 2**80, 2**10) == 7


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        project_blocks([(1, 1)], -1)
    with pytest.raises(ValueError):
        project_bytes([(1, 1)], 10, 0)
    with pytest.raises(ValueError):
        project_blocks([(0, 1)], 3)


def test_matches_threshold_definition() -> None:
    """hit_blocks(C) = |{j : threshold_j <= C}| with thresholds start, start+1, ..."""
    rng = random.Random(1)
    for _ in range(500):
        curve, start = [], 0
        for _ in range(rng.randint(0, 5)):
            start += rng.randint(1, 6)
            run = rng.randint(1, 5)
            curve.append((start, run))
            start += run
        thresholds = [s + j for s, r in curve for j in range(r)]
        for capacity in range(0, start + 3):
            assert project_blocks(curve, capacity) == sum(t <= capacity for t in thresholds)
