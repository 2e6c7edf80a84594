"""The request category of every facts row, from the trace and config the facts were replayed
from (the workload profile's categories, litehit.categories): the trace is read once more and
routed as the replay routed it, so lane L's k-th request is its k-th facts row.

The facts are checked against that: every lane the same number of rows with the same input
lengths and timestamps; when they differ (facts from another trace or config) there are no
categories and the caller says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from litehit.replay.chunks import TraceChunks, resolve_format
from litehit.replay.plan import make_plan
from litehit.spec import ReplaySpec
from litehit.tiers.document import LaneCategories
from litehit.tiers.lanes import LaneFacts

__all__ = ["trace_categories"]


def trace_categories(runtime: ReplaySpec, lanes: Sequence[LaneFacts]) -> tuple[LaneCategories | None, str | None, bool]:
    """(categories, None, hashed), or (None, why not, hashed) when the facts are not this
    replay's; hashed: every lane chains its keys into prefix keys (enable_prefix_hash), so
    every request keeps the prefix contract."""
    path = runtime.trace_file_path
    plan = make_plan(runtime, resolve_format(runtime, path), path)
    hashed = all(lane.prefix_hash for lane in plan.lanes)
    ids: dict[str, list[npt.NDArray[np.int32]]] = {lane.instance_id: [] for lane in plan.lanes}
    lens: dict[str, list[npt.NDArray[np.int64]]] = {lane.instance_id: [] for lane in plan.lanes}
    stamps: dict[str, list[npt.NDArray[np.int64]]] = {lane.instance_id: [] for lane in plan.lanes}
    for chunk in TraceChunks(runtime, plan):
        for spec, work in zip(plan.lanes, chunk.lanes, strict=True):
            ids[spec.instance_id].append(work.categories)
            lens[spec.instance_id].append(work.input_lens)
            stamps[spec.instance_id].append(work.timestamps)
    out: dict[str, npt.NDArray[np.int32]] = {}
    for lane in lanes:
        if lane.instance_id not in ids:
            return None, f"lane {lane.instance_id} is not a lane of the replay's config", False
        cats = np.concatenate([np.empty(0, np.int32), *ids[lane.instance_id]])
        input_lens = np.concatenate([np.empty(0, np.int64), *lens[lane.instance_id]])
        times = np.concatenate([np.empty(0, np.int64), *stamps[lane.instance_id]])
        if len(cats) != lane.requests or not (
            np.array_equal(input_lens, lane.input_len) and np.array_equal(times, lane.timestamp)
        ):
            return None, f"lane {lane.instance_id}: the facts are not the requests of the replay's trace", False
        out[lane.instance_id] = cats
    return LaneCategories(list(plan.categories.names), out), None, hashed
