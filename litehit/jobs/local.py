"""A kind run in process (the CLI): one pass over the trace, the parts fed their lanes' chunks in
up to ``workers`` threads (the C engine releases the GIL), each part always by the same thread
and up to AHEAD chunks ahead of the merge, so a thread that finished a chunk goes on with the
next one instead of waiting for the others; then the same merge as the service's
(litehit.jobs.stored). Nothing is published unless the whole pass succeeded.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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


AHEAD = 2
"""Chunks a part may be fed ahead of the slowest part (each holds its lanes' work in memory)."""


class _Skipped(Exception):
    """A chunk not fed to a part that had failed on an earlier one."""


class _Feeding:
    """The parts fed chunk by chunk by `threads` threads, unit by unit: a unit is a list of parts
    fed one after the other by one thread, always the same (unit k by thread k mod threads; one
    unit: the caller's thread), so a part's chunks stay in order and a part that reads what an
    earlier part of its unit computed for the chunk finds it. Outputs are taken back in input
    order: a chunk's first failing part (in part order) raises when that chunk is taken, so an
    earlier chunk's failure always comes first. A part that failed is not fed again, nor are the
    parts after it in its unit (the chunks already queued for them are skipped): a part's
    failure must be its last call, as a profile's recorder, which follows its lane one chunk
    behind, relies on."""

    def __init__(
        self, runs: Sequence[PartRun], lanes: Sequence[int], threads: int, units: Sequence[Sequence[int]]
    ) -> None:
        self.runs, self.lanes, self.units = runs, lanes, [list(unit) for unit in units]
        count = max(1, min(threads, len(self.units))) if len(self.units) > 1 else 0
        self.pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"litehit-parts{k}") for k in range(count)]
        self.pending: deque[tuple[ChunkPlan, list[Future[list[Any]]]]] = deque()
        self.failed = [False] * len(runs)  # set by a unit's own thread, read by it before its next chunk

    def submit(self, chunk: ChunkPlan) -> list[tuple[ChunkPlan, list[Any]]]:
        """Feeds chunk to every part; returns the chunks whose outputs are all in, with them."""
        if not self.pools:
            return [(chunk, self._in_part_order([self._feed(0, chunk)]))]
        futures = [self.pools[k % len(self.pools)].submit(self._feed, k, chunk) for k in range(len(self.units))]
        self.pending.append((chunk, futures))
        done = []
        while len(self.pending) > AHEAD:
            done.append(self._take())
        return done

    def _feed(self, unit: int, chunk: ChunkPlan) -> list[Any]:
        """Each part's output of the chunk, or the exception that stopped the unit there (the parts
        after it: _Skipped)."""
        out: list[Any] = []
        for k in self.units[unit]:
            if self.failed[k]:
                out.append(_Skipped())  # (taken after the part's failure, which is raised first: an earlier chunk's)
                continue
            try:
                out.append(self.runs[k].feed(chunk.lanes[self.lanes[k]]))
            except BaseException as exc:
                for rest in self.units[unit]:
                    self.failed[rest] = True
                out.append(exc)
        return out

    def _in_part_order(self, outcomes: list[list[Any]]) -> list[Any]:
        """The units' outcomes as one output per part, in part order; the first failure raises."""
        outputs: list[Any] = [None] * len(self.runs)
        for unit, outcome in zip(self.units, outcomes, strict=True):
            for k, value in zip(unit, outcome, strict=True):
                outputs[k] = value
        for value in outputs:
            if isinstance(value, BaseException):
                raise value
        return outputs

    def drain(self) -> list[tuple[ChunkPlan, list[Any]]]:
        """Every chunk still being fed, with its outputs, in input order."""
        return [self._take() for _ in range(len(self.pending))]

    def _take(self) -> tuple[ChunkPlan, list[Any]]:
        chunk, futures = self.pending.popleft()
        return chunk, self._in_part_order([f.result() for f in futures])

    def close(self) -> None:
        """Stops feeding: chunks not started are dropped, the ones being fed are waited for (the
        parts' memory is freed only after this). Closing again does nothing."""
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self.pending.clear()


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
    units = kind.part_units(plan, parts)
    runs: list[PartRun] = []
    merger = None
    feeding: _Feeding | None = None
    try:
        opened: dict[int, PartRun] = {}
        for unit in units:
            unit_runs = kind.open_unit(spec, plan, [parts[k] for k in unit])
            runs.extend(unit_runs)  # (closed on a failure)
            opened.update(zip(unit, unit_runs, strict=True))
        runs = [opened[k] for k in range(len(parts))]
        merger = kind.merger(spec, runtime, plan, parts)
        chunks = TraceChunks(runtime, plan, on_progress=on_progress, should_stop=should_stop, chunk_bytes=chunk_bytes)
        sizes = [[0, 0] for _ in parts]  # requests, blocks of each part's lane
        feeding = _Feeding(runs, lanes, runtime.workers, units)

        def taken(chunk: ChunkPlan, emitted: list[Any]) -> None:
            for size, lane in zip(sizes, lanes, strict=True):
                work = chunk.lanes[lane]
                size[0] += work.requests
                size[1] += len(work.keys)
            if kind.chunk_arrays:
                merger.add_chunk(chunk, emitted)

        with contextlib.closing(iter(chunks)) as planned:  # closed at once on a failure: its threads end
            while True:
                try:
                    chunk = next(planned)
                except StopIteration:
                    break
                except BaseException:  # the trace failed here (or the run was cancelled): the chunks before first
                    for done in feeding.drain():
                        taken(*done)
                    raise
                for done in feeding.submit(chunk):
                    taken(*done)
        for done in feeding.drain():
            taken(*done)
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
        if feeding is not None:
            feeding.close()  # the parts' threads are quiet before the parts are asked for their failures
        raise_in_order(exc, [*runs, merger])
    finally:
        if feeding is not None:
            feeding.close()
        for run in runs:
            run.close()
        if merger is not None:
            merger.close()
    return LocalRun(merged, parts, outputs, counts)
