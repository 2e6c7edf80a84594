"""The in-process profile (the CLI): one pass over the trace, every lane advanced chunk by chunk
in parallel threads (the C lane core and recorder release the GIL). Running a lane's recorder
one chunk behind its core in another thread was measured no faster on 2 cores (the trace parser
already takes the second)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from litehit.profile.result import ProfileResult
from litehit.profile.runs import ProfileRun
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.plan import make_plan
from litehit.spec import ReplaySpec

__all__ = ["run_profile"]


def run_profile(
    spec: ReplaySpec,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ProfileResult:
    """Profiles every lane of the spec (its routing, re-blocking and TTLs) in one pass."""
    path = spec.trace_file_path
    fmt = resolve_format(spec, path)
    plan = make_plan(spec, fmt, path)
    runs = [ProfileRun(lane, fmt) for lane in plan.lanes]
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(spec.workers, len(runs)))) as pool:
            for chunk in TraceChunks(spec, plan, on_progress=on_progress, should_stop=should_stop):
                list(pool.map(ProfileRun.feed, runs, chunk.lanes))
        lanes = [run.result(plan.categories.names) for run in runs]
    finally:
        for run in runs:
            run.close()
    return ProfileResult(trace_format=fmt.value, lanes=lanes)
