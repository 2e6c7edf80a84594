"""One lane of a profile: the exact lane core (for the hit curve) and a ProfileRecorder beside it,
fed LaneWork in order (per-block work in C; per chunk only numpy), and the lane's profile made
from what they kept. The recorder follows the lane core one chunk behind in a thread of its own
(both release the GIL in C), so a profile costs about what the slower of the two does."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

import core_c
from core_c.lane import BatchFacts
from core_c.profile import ProfileArrays
from litehit.profile.metrics import (
    Tally,
    capacity_points,
    lifespan,
    merge_tallies,
    reuse_time,
    skew,
    tally,
    tally_runs,
    working_set,
)
from litehit.profile.result import LaneProfile, Lifespan, Metrics, OverallMetrics, ReuseTime
from litehit.quantiles import NS_PER_S
from litehit.replay.ordered_map import OneBehind
from litehit.replay.plan import LaneSpec, LaneWork
from litehit.spec import TraceFormat

__all__ = ["WORKING_SET_WINDOW_NS", "ProfileRun", "is_multi_turn"]

WORKING_SET_WINDOW_NS = 60 * NS_PER_S

Int64Array = npt.NDArray[np.int64]


def is_multi_turn(category: str) -> bool:
    """A qwen_bailian category (type-turnbucket) of turn 2 or more."""
    return category.endswith(("-2", "-3+"))


_REQUESTS, _INPUT_TOKENS, _BLOCKS, _HIT_BLOCKS = range(4)  # the columns of the per-category sums


class ProfileRun:
    """A lane replayed at infinite capacity with its TTL, recording the profile's raw material."""

    def __init__(self, lane: LaneSpec, fmt: TraceFormat) -> None:
        self.lane = lane
        self.fmt = fmt
        self.core = core_c.Lane(lane.ttl_ns, key_ids=True)  # the recorder takes its key numbers: no map of its own
        self.recorder = core_c.ProfileRecorder(WORKING_SET_WINDOW_NS)
        self._sums = np.zeros((0, 4), dtype=np.int64)  # [category, column]
        self._hits: list[npt.NDArray[np.int32]] = []  # per request: hit blocks (< 2^31: a request's blocks)
        self._categories: list[npt.NDArray[np.int32]] = []
        self._recording = OneBehind("litehit-profile")  # the recorder's thread, a chunk behind the lane core

    def feed(self, work: LaneWork) -> None:
        """Replays the next chunk of the lane's requests and records it in the recording thread
        while the lane core goes on with the chunk after (one chunk in flight: a recording that
        failed raises here, at the next chunk, or at result())."""
        try:
            facts = self.replay(work)
        except BaseException:
            self._recording.wait()  # a failure of the chunk before comes first
            raise
        self._recording.submit(self.record, work, facts)

    def replay(self, work: LaneWork) -> BatchFacts:
        """The lane core's facts of the next chunk (record them next)."""
        return self.core.process_batch(work.keys, work.offsets, work.timestamps)

    def record(self, work: LaneWork, facts: BatchFacts) -> None:
        """Records a chunk the lane core has replayed."""
        hits = self.recorder.record_batch(work.keys, work.offsets, work.timestamps, work.categories, facts)
        cats = work.categories
        if len(cats):
            rows = int(cats.max()) + 1
            if rows > len(self._sums):
                self._sums = np.vstack([self._sums, np.zeros((rows - len(self._sums), 4), dtype=np.int64)])
            for column, values in (
                (_INPUT_TOKENS, work.input_lens),
                (_BLOCKS, np.diff(work.offsets)),
                (_HIT_BLOCKS, hits),
            ):
                np.add.at(self._sums[:, column], cats, values)
            np.add.at(self._sums[:, _REQUESTS], cats, 1)
        self._hits.append(hits.astype(np.int32))
        self._categories.append(cats)

    def result(self, category_names: list[str]) -> LaneProfile:
        """The lane's profile (releases the lane core and the recording thread: call it once, last)."""
        self._recording.close()
        self.core.close()  # the lane core's part is done: its memory is not held while the metrics are made
        hits = np.concatenate([np.empty(0, np.int32), *self._hits])
        cats = np.concatenate([np.empty(0, np.int32), *self._categories])
        self._hits, self._categories = [], []
        sums = self._sums
        multi = None
        if self.fmt is TraceFormat.QWEN_BAILIAN:  # the turn is part of the category
            multi = np.array([is_multi_turn(category_names[c]) for c in range(len(sums))], dtype=bool)
        a = self.recorder.arrays()
        present = np.flatnonzero(sums[:, _REQUESTS]).tolist()
        lane_hits = int(sums[:, _HIT_BLOCKS].sum())
        # the reuse times are tallied (the most values) in a thread while the lane's other
        # metrics are computed here (the tally and numpy's sorts run outside the GIL)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="litehit-profile") as pool:
            sorting = pool.submit(self._reuse_tallies, present)
            overall, overall_lifespan = self._metrics(
                a,
                sums.sum(axis=0),
                lane_hits,
                multi,
                sums[:, _REQUESTS],
                None,
                lambda: sorting.result()[2],
                a.reuses.astype(np.int64),
                len(a.reuses),
                hits,
            )
            reuse_times, everything, lane_reuse = sorting.result()
        categories = {}
        first_cat = a.first_cat if present else None  # a gather over every key: once, not per category
        for c in present:
            counts = self._key_reuses(a, c)
            reuse = lane_reuse if reuse_times[c] is everything else reuse_time(reuse_times[c])
            only = np.zeros(len(sums), dtype=np.int64)
            only[c] = sums[c, _REQUESTS]
            categories[category_names[c]], _ = self._metrics(
                a,
                sums[c],
                lane_hits,
                multi,
                only,
                c,
                lambda reuse=reuse: reuse,  # type: ignore[misc]
                counts,
                len(counts),
                hits if len(present) == 1 else hits[cats == c],
                overall_lifespan,
                first_cat,
            )
        lane = self.lane
        return LaneProfile(
            lane=lane.instance_id,
            block_size=lane.block_size,
            block_bytes=lane.block_bytes,
            ttl_s=lane.ttl_ns / NS_PER_S if lane.ttl_ns else None,
            overall=OverallMetrics(
                **overall.model_dump(),
                capacity=capacity_points(a.threshold_slope, lane.block_bytes),
                working_set_60s=working_set(a.window, a.window_keys, self.recorder.window_ns),
            ),
            categories=categories,
        )

    def _reuse_tallies(self, present: list[int]) -> tuple[dict[int, Tally], Tally, ReuseTime]:
        """Each present category's reuse times tallied (from the recorder's runs of them), all
        of them together, and the lane's reuse-time statistics."""
        reuse_times = {c: tally_runs((r := self.recorder.reuses_of(c)).ns, r.runs) for c in present}
        everything = merge_tallies(list(reuse_times.values()))
        return reuse_times, everything, reuse_time(everything)

    def _key_reuses(self, a: ProfileArrays, category: int) -> Int64Array:
        """The reuse counts of the keys category's reuses hit (zeros dropped)."""
        if len(a.base_reuses) == 0:  # one category has reused: the per-key counts are its own
            counts = a.reuses.astype(np.int64) if category == a.base_category else np.empty(0, np.int64)
        else:
            counts = np.bincount(self.recorder.reuses_of(category).keys, minlength=len(a.reuses)).astype(np.int64)
            if category == a.base_category:
                counts[: len(a.base_reuses)] += a.base_reuses
        return counts[counts > 0]

    def _metrics(
        self,
        a: ProfileArrays,
        sums: Int64Array,
        lane_hits: int,
        multi: npt.NDArray[np.bool_] | None,
        requests_by_category: Int64Array,
        category: int | None,
        reuse: Callable[[], ReuseTime],
        key_reuses: Int64Array,
        keys: int,
        request_hits: npt.NDArray[np.int32],
        lane_lifespan: Lifespan | None = None,
        first_cat: npt.NDArray[np.int32] | None = None,
    ) -> tuple[Metrics, Lifespan]:
        """The metrics of a category (None: the whole lane) from its sums (a row of the
        per-category sums), its requests per category, its reuse times' statistics (asked for
        last), the reuse counts of `keys` keys (zeros may be left out) and its requests' hit
        blocks; and its lifespan. lane_lifespan: the lane's, which is a category's when that
        category first accessed every key; first_cat: each key's a.first_cat, if already made."""
        if category is None:
            spans, once = a.lifespans()
            keys_lifespan = lifespan(tally(spans, in_place=True), once)
        else:
            first = (a.first_cat if first_cat is None else first_cat) == category
            if lane_lifespan is not None and bool(first.all()):
                keys_lifespan = lane_lifespan
            else:
                spans, once = a.lifespans(first)
                keys_lifespan = lifespan(tally(spans, in_place=True), once)
        requests, input_tokens = int(sums[_REQUESTS]), int(sums[_INPUT_TOKENS])
        hit_blocks = int(sums[_HIT_BLOCKS])
        hit_tokens = hit_blocks * self.lane.block_size
        multi_turn = None
        if multi is not None:
            multi_turn = int(requests_by_category[multi].sum()) / requests if requests else 0.0
        key_skew = skew(key_reuses, keys, request_hits.astype(np.int64))
        metrics = Metrics(
            requests=requests,
            input_tokens=input_tokens,
            blocks=int(sums[_BLOCKS]),
            hit_blocks=hit_blocks,
            hit_tokens=hit_tokens,
            ideal_hit_ratio=hit_tokens / input_tokens if input_tokens else 0.0,
            hit_token_share=hit_blocks / lane_hits if lane_hits else 0.0,
            multi_turn_share=multi_turn,
            reuse_time=reuse(),
            lifespan=keys_lifespan,
            skew=key_skew,
        )
        return metrics, keys_lifespan

    def settle(self) -> None:
        """Waits for the chunk being recorded; raises its failure (the run's, if the run failed
        later: it is an earlier chunk's)."""
        self._recording.wait()

    def close(self) -> None:
        self._recording.drain()  # before the memory it records into is freed
        self.core.close()
        self.recorder.close()
