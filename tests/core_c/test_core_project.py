"""The projector (HitCurveProjectorTest) and its agreement with a brute-force definition."""

from __future__ import annotations

import random

import numpy as np
import pytest

from core_c import project_blocks, project_bytes, project_infinite
from core_c.project import curve_add, curve_points


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


def _random_curve(rng: random.Random, segments: int, gap: int, runs: tuple[int, int]) -> list[tuple[int, int]]:
    """A well-formed curve of 0..segments segments, each 1..gap past the previous one's end."""
    curve, start = [], 0
    for _ in range(rng.randint(0, segments)):
        start += rng.randint(1, gap)
        run = rng.randint(*runs)
        curve.append((start, run))
        start += run
    return curve


def test_matches_threshold_definition() -> None:
    """hit_blocks(C) = |{j : threshold_j <= C}| with thresholds start, start+1, ..."""
    rng = random.Random(1)
    for _ in range(500):
        curve = _random_curve(rng, 5, 6, (1, 5))
        end = curve[-1][0] + curve[-1][1] if curve else 0
        thresholds = [s + j for s, r in curve for j in range(r)]
        for capacity in range(0, end + 3):
            assert project_blocks(curve, capacity) == sum(t <= capacity for t in thresholds)


def _random_curves(rng: random.Random, requests: int) -> list[list[tuple[int, int]]]:
    return [_random_curve(rng, 4, 9, (0, 6)) for _ in range(requests)]


def test_summed_curve_matches_threshold_definition() -> None:
    """curve_add / curve_points against the thresholds counted one capacity at a time: capacity 0,
    then every capacity where the summed hit blocks rise, with those sums; chunks of requests
    added to a difference array that grows as curve_add asks (nothing changed when it asks)."""
    rng = random.Random(7)
    for _ in range(200):
        curves = _random_curves(rng, rng.randint(0, 12))
        thresholds = [s + j for curve in curves for s, r in curve for j in range(r)]
        top = max(thresholds, default=0)
        want_caps, want_hits, last = [0], [0], 0
        for capacity in range(1, top + 2):
            hits = sum(t <= capacity for t in thresholds)
            if hits != last:
                want_caps.append(capacity)
                want_hits.append(hits)
                last = hits
        diff, size = np.zeros(rng.randint(0, 3), np.int64), 0
        for lo in range(0, len(curves), 3):
            segs = np.array([p for curve in curves[lo : lo + 3] for p in curve], np.int64).reshape(-1, 2)
            before = diff.copy()
            need = curve_add(diff, segs)
            assert need == (int((segs[:, 0] + segs[:, 1]).max()) + 1 if len(segs) else 0)
            if need > len(diff):
                assert (diff == before).all()
                diff = np.concatenate([diff, np.zeros(need - len(diff), np.int64)])
                assert curve_add(diff, segs) == need
            size = max(size, need)
        caps, hits = curve_points(diff[: max(size, 1)])
        assert caps.tolist() == want_caps
        assert hits.tolist() == want_hits


def test_curve_add_refuses_malformed_segments_and_changes_nothing() -> None:
    diff = np.zeros(8, np.int64)
    for bad in ([[0, 1]], [[2, -1]], [[1, 1], [-3, 4]]):
        with pytest.raises(ValueError, match="start >= 1 and run >= 0"):
            curve_add(diff, np.array(bad, np.int64))
        assert not diff.any()


def test_curve_add_needs_a_writeable_int64_array() -> None:
    with pytest.raises(ValueError):
        curve_add(np.zeros(4, np.int32), np.array([[1, 1]], np.int64))
    frozen = np.zeros(4, np.int64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        curve_add(frozen, np.array([[1, 1]], np.int64))
