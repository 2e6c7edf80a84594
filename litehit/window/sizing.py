"""The in-process window sizing (the CLI): one pass over the trace, every lane advanced chunk by
chunk in parallel threads (the C simulator releases the GIL)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from litehit.policies.options import check_sweepable
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.plan import make_plan
from litehit.spec import ReplaySpec
from litehit.window.options import WindowOptions
from litehit.window.result import WindowResult, WindowSettings
from litehit.window.runs import DelaySample, WindowRun, report_of

__all__ = ["run_window_sizing"]


def run_window_sizing(
    spec: ReplaySpec,
    options: WindowOptions,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> WindowResult:
    """Simulates every lane of the spec at the options' capacity and policy, in one pass, and
    sizes the eviction-attribution window per lane, per category and over all lanes."""
    path = spec.trace_file_path
    check_sweepable(spec)  # no TTL: a missing key that was ever inserted was evicted
    plan = make_plan(spec, resolve_format(spec, path), path)
    runs = [WindowRun(lane, options) for lane in plan.lanes]
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(spec.workers, len(runs)))) as pool:
            for chunk in TraceChunks(spec, plan, on_progress=on_progress, should_stop=should_stop):
                list(pool.map(WindowRun.feed, runs, chunk.lanes))
        names = plan.categories.names
        lanes = [run.result(names) for run in runs]
        everything = DelaySample()
        for run in runs:
            everything.extend(run.sample)
        overall, _, _ = report_of(everything, names, options.coverage)
    finally:
        for run in runs:
            run.close()
    settings = WindowSettings(
        policy=options.policy,
        capacity_gb=options.capacity_gb,
        coverage_target=options.coverage,
        entry_bytes=options.entry_bytes,
        load_factor=options.load_factor,
        bucket_s=options.bucket_seconds,
    )
    return WindowResult(settings=settings, lanes=lanes, overall=overall)
