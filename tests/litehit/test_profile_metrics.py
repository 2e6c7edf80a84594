"""The profile's skew shares (litehit.profile.metrics.shares_for) against a naive computation:
sort every count, walk down until the running sum reaches the percent of the total."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from litehit.profile.metrics import MAX_TALLIED, shares_for

PERCENTS = [1, 50, 77, 90, 99, 100]


def naive_shares(counts: list[int], percents: list[int], population: int) -> list[float]:
    total = sum(counts)
    if total == 0 or population == 0:
        return [0.0] * len(percents)
    ordered = sorted(counts, reverse=True)
    shares = []
    for p in percents:
        running = 0
        for taken, count in enumerate(ordered, start=1):
            running += count
            if 100 * running >= p * total:
                shares.append(taken / population)
                break
    return shares


@settings(max_examples=300, deadline=None, database=None)
@given(
    counts=st.lists(
        st.one_of(st.just(0), st.integers(1, 5), st.integers(0, 2**31), st.integers(2**40, 2**62)), max_size=80
    ),
    extra=st.integers(0, 3),
)
def test_shares_match_a_sort_of_every_count(counts: list[int], extra: int) -> None:
    # counts up to 2^62: their total passes int64 in some examples (the exact Python path)
    population = len(counts) + extra  # the keys whose count is 0 may be left out
    got = shares_for(np.array(counts, dtype=np.int64), PERCENTS, population)
    assert got == naive_shares(counts, PERCENTS, population)


def test_shares_with_more_distinct_counts_than_the_tally_map_holds() -> None:
    rng = np.random.default_rng(7)
    counts = rng.permutation(np.arange(MAX_TALLIED + 1000, dtype=np.int64))  # every count distinct: the sort path
    want = naive_shares(counts.tolist(), PERCENTS, len(counts))
    assert shares_for(counts, PERCENTS, len(counts)) == want
