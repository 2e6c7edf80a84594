"""A kind run in process (the CLI): one pass over the trace, every part fed its lane's chunk in
parallel threads (the C engine releases the GIL), chunk by chunk; then the same merge as the
service's (litehit.jobs.stored). Nothing is published unless the whole pass succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from litehit.jobs.base import Merged, PartOutput, PartPlan, PartRun, TraceCounts, TraceKind, raise_in_order
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.plan import ChunkPlan, make_plan
from litehit.spec import ReplaySpec
from litehit.traces.source import CHUNK_BYTES

__all__ = ["LocalRun", "run_local"]


@dataclass(frozen=True)
class LocalRun:
    """A finished run: the merge's result, the parts (their lane sizes filled in) and what each
    found, and what the pass over the trace counted."""

    merged: Merged
    parts: list[PartPlan]
    outputs: list[PartOutput]
    counts: TraceCounts


def _feed(pool: ThreadPoolExecutor, runs: Sequence[PartRun], lanes: Sequence[int], chunk: ChunkPlan) -> list[Any]:
    if len(runs) == 1:
        return [runs[0].feed(chunk.lanes[lanes[0]])]
    return list(pool.map(lambda run, lane: run.feed(chunk.lanes[lane]), runs, lanes))


def run_local(
    kind: TraceKind[Any],
    spec: Any,
    runtime: ReplaySpec,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> LocalRun:
    """Runs a job of `kind` (its stored spec `spec`) over runtime.trace_file_path.

    Raises ReplayError (the trace's first failing row, in input order), ConfigError (a config
    the kind cannot run) or ReplayCancelled; in every failure case nothing is published."""
    start = time.perf_counter()
    path = runtime.trace_file_path
    kind.check(runtime)
    plan = make_plan(runtime, resolve_format(runtime, path), path)
    parts = kind.parts(spec, plan)
    lanes = [p.lane for p in parts]
    runs: list[PartRun] = []
    merger = None
    try:
        for part in parts:
            runs.append(kind.open_part(spec, plan, part))
        merger = kind.merger(spec, runtime, plan, parts)
        chunks = TraceChunks(runtime, plan, on_progress=on_progress, should_stop=should_stop, chunk_bytes=chunk_bytes)
        sizes = [[0, 0] for _ in parts]  # requests, blocks of each part's lane
        with ThreadPoolExecutor(max_workers=max(1, min(runtime.workers, len(runs)))) as pool:
            for chunk in chunks:
                emitted = _feed(pool, runs, lanes, chunk)
                for size, lane in zip(sizes, lanes, strict=True):
                    work = chunk.lanes[lane]
                    size[0] += work.requests
                    size[1] += len(work.keys)
                if kind.chunk_arrays:
                    merger.add_chunk(chunk, emitted)
        outputs = [run.output(plan.categories.names) for run in runs]
        parts = [
            part.model_copy(update={"requests_total": size[0], "blocks_total": size[1]})
            for part, size in zip(parts, sizes, strict=True)
        ]
        counts = TraceCounts(
            plan.fmt.value, chunks.lines, chunks.rows, chunks.reads, chunks.blocks, time.perf_counter() - start
        )
        merged = merger.finish(outputs, counts)
    except BaseException as exc:  # (a facts file that could not be written fails the replay)
        raise_in_order(exc, [*runs, merger])
    finally:
        for run in runs:
            run.close()
        if merger is not None:
            merger.close()
    return LocalRun(merged, parts, outputs, counts)
