"""The one loop over a trace: chunks scanned in threads, then routed and normalized in input order.

Every pass over a trace (the in-process replay, the service's parse stage, and the analyses that
replay lanes themselves) iterates ``TraceChunks``; only what each does with a planned chunk differs.
The loop owns what must be the same everywhere: cancellation, the counters, progress reports, the
"nothing to replay" errors and the wrapping of trace errors into ReplayError.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from litehit.errors import ReplayCancelled, ReplayError, TraceError
from litehit.replay.ordered_map import ordered_map, run_as_helper
from litehit.replay.plan import ChunkPlan, ReplayPlan, plan_chunk
from litehit.spec import ReplaySpec, TraceFormat
from litehit.traces.formats import detect_format
from litehit.traces.scan import ParsedChunk, scan_chunk
from litehit.traces.source import CHUNK_BYTES, iter_text_chunks, open_trace

__all__ = ["Progress", "TraceChunks", "resolve_format"]


@dataclass(frozen=True, slots=True)
class Progress:
    lines: int
    reads: int
    blocks: int
    bytes_read: int
    bytes_total: int
    elapsed_s: float


def resolve_format(spec: ReplaySpec, path: str) -> TraceFormat:
    """The spec's trace_format, or the one detected from the first row."""
    if spec.trace_format is not None:
        return spec.trace_format
    try:
        fmt = detect_format(path)
    except TraceError as exc:  # line 0: the whole file (unreadable), no line to name
        raise ReplayError(f"failed to load/replay trace: {exc}", path=path, line=exc.line or None) from None
    if fmt is None:
        raise _nothing_loaded(path)
    return fmt


def _nothing_loaded(path: str) -> ReplayError:
    return ReplayError(f"failed to load/replay trace: No optimizer traces loaded from file: {path}", path=path)


class TraceChunks:
    """Iterates the planned chunks of ``spec.trace_file_path`` in input order (fail-fast).

    Counters (``chunks``, ``lines``, ``rows``, ``reads``, ``blocks``) cover the chunks handed out
    so far; ``on_progress`` is called after the caller has finished with each chunk. Iteration
    raises ReplayCancelled when ``should_stop()`` turns true, ReplayError for a malformed trace
    (naming file and line) and, once the trace is exhausted, ReplayError when it held no rows or
    no reads. A caller publishes only after the loop ended normally.
    """

    def __init__(
        self,
        spec: ReplaySpec,
        plan: ReplayPlan,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.spec = spec
        self.plan = plan
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.chunk_bytes = chunk_bytes
        self.chunks = self.lines = self.rows = self.reads = self.blocks = 0

    def __iter__(self) -> Generator[ChunkPlan, None, None]:
        start = time.perf_counter()
        path = self.spec.trace_file_path
        try:
            bytes_total = Path(path).stat().st_size
        except OSError:
            bytes_total = 0
        scan = partial(scan_chunk, fmt=self.plan.fmt, trace_block_size=self.plan.trace_block_size)
        try:
            with (
                open_trace(path) as stream,
                contextlib.closing(
                    ordered_map(scan, iter_text_chunks(stream, path, self.chunk_bytes), self.spec.workers)
                ) as scanned,
                contextlib.closing(self._planned_ahead(scanned)) as chunks,
            ):
                for chunk in chunks:
                    if self.should_stop is not None and self.should_stop():
                        raise ReplayCancelled("cancelled; nothing was published")
                    yield chunk
                    self.chunks += 1
                    self.lines += chunk.lines
                    self.rows += chunk.rows
                    self.reads += chunk.reads
                    self.blocks += chunk.raw_blocks
                    if self.on_progress is not None:
                        elapsed = time.perf_counter() - start
                        self.on_progress(
                            Progress(self.lines, self.reads, self.blocks, chunk.source_offset, bytes_total, elapsed)
                        )
        except TraceError as exc:
            raise ReplayError(f"failed to load/replay trace: {exc}", path=path, line=exc.line or None) from None
        if self.rows == 0:
            raise _nothing_loaded(path)
        if self.reads == 0:
            raise ReplayError("trace contains no valid Request/Get events", path=path)

    def _planned_ahead(self, scanned: Iterator[ParsedChunk]) -> Generator[ChunkPlan, None, None]:
        """The scanned chunks planned in order (the plan's tables and the timestamp order carry
        from one chunk to the next) in a thread of its own, a chunk ahead of the caller: chunk
        i + 1 is planned while the caller works on chunk i. This generator pulls the scanned
        chunks in the caller's thread, and a failure comes in input order: chunk i (its plan's
        failure, or the chunk) before chunk i + 1's scan failure."""
        last_ts: list[int | None] = [None]  # of the chunks planned so far

        def planned(parsed: ParsedChunk) -> ChunkPlan:
            chunk = plan_chunk(self.plan, parsed, last_ts[0])
            last_ts[0] = chunk.last_timestamp
            return chunk

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="litehit-plan", initializer=run_as_helper) as pool:
            pending: Future[ChunkPlan] | None = None
            while True:
                try:
                    parsed = next(scanned)
                except StopIteration:
                    break
                except BaseException:
                    if pending is not None:  # the chunk before comes first
                        yield pending.result()
                    raise
                ahead = pool.submit(planned, parsed)
                if pending is not None:
                    yield pending.result()
                pending = ahead
            if pending is not None:
                yield pending.result()
