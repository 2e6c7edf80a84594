"""The in-process replay runner: stream the trace, replay every lane, publish the facts.

    trace file --chunks--> scan (threads) --> plan (route + normalize) --> lanes --> render
                                                                   --> litehit_facts.csv.tmp --> rename

Fail-fast: the first malformed row, unsorted timestamp, unknown instance or length-contract
violation (in input order) aborts the replay and nothing is published. Output bytes do not
depend on pipeline_worker_count.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from litehit.errors import PublishError, ReplayError, TraceError
from litehit.publish import AtomicPublisher
from litehit.replay.lanes import LaneFacts, LaneRunner
from litehit.replay.ordered_map import ordered_map
from litehit.replay.plan import ChunkPlan, make_plan, plan_chunk
from litehit.replay.render import header_for, render_chunk
from litehit.spec import ReplaySpec, TraceFormat
from litehit.traces.formats import detect_format
from litehit.traces.scan import scan_chunk
from litehit.traces.source import CHUNK_BYTES, iter_text_chunks, open_trace

__all__ = [
    "FACTS_FILE",
    "LaneStats",
    "Progress",
    "ReplayCancelled",
    "ReplayResult",
    "resolve_format",
    "run_replay",
]

FACTS_FILE = "litehit_facts.csv"


class ReplayCancelled(ReplayError):
    """The replay was cancelled by its caller; nothing was published."""


@dataclass(frozen=True, slots=True)
class Progress:
    lines: int
    reads: int
    blocks: int
    bytes_read: int
    bytes_total: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class LaneStats:
    instance_id: str
    requests: int
    blocks: int
    unique_blocks: int
    memory_bytes: int
    expired_blocks: int


@dataclass(frozen=True)
class ReplayResult:
    facts_path: Path
    trace_format: TraceFormat
    lines: int
    rows: int
    reads: int
    facts_rows: int
    blocks: int
    elapsed_s: float
    lanes: list[LaneStats] = field(default_factory=list)


def resolve_format(spec: ReplaySpec, path: str) -> TraceFormat:
    """The spec's trace_format, or the one detected from the first row."""
    if spec.trace_format is not None:
        return spec.trace_format
    try:
        fmt = detect_format(path)
    except TraceError as exc:
        raise ReplayError(f"failed to load/replay trace: {exc}", path=path, line=exc.line) from None
    if fmt is None:
        raise ReplayError(f"failed to load/replay trace: No optimizer traces loaded from file: {path}", path=path)
    return fmt


def run_replay(
    spec: ReplaySpec,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> ReplayResult:
    """Replays spec.trace_file_path into spec.output_result_path/litehit_facts.csv.

    Raises ReplayError (fail-fast reasons), ConfigError (routing impossible for the format) or
    ReplayCancelled; in every failure case nothing is published and an older facts file stays.
    """
    start = time.perf_counter()
    path = spec.trace_file_path
    fmt = resolve_format(spec, path)
    plan = make_plan(spec, fmt, path)
    out_dir = Path(spec.output_result_path)
    runners = [LaneRunner(lane, keep_expired=plan.extended) for lane in plan.lanes]
    try:
        bytes_total = Path(path).stat().st_size
    except OSError:
        bytes_total = 0
    lines = rows = reads = facts_rows = blocks = 0
    prev_ts: int | None = None
    try:
        with (
            AtomicPublisher(out_dir / FACTS_FILE) as publisher,
            open_trace(path) as stream,
            ThreadPoolExecutor(max_workers=min(len(runners), spec.workers)) as lane_pool,
            contextlib.closing(
                ordered_map(
                    partial(scan_chunk, fmt=fmt, trace_block_size=plan.trace_block_size),
                    iter_text_chunks(stream, path, chunk_bytes),
                    spec.workers,
                )
            ) as scanned,
        ):
            publisher.write(header_for(plan.extended))
            for parsed in scanned:
                if should_stop is not None and should_stop():
                    raise ReplayCancelled("replay cancelled; no facts published")
                chunk = plan_chunk(plan, parsed, prev_ts)
                facts = _run_lanes(runners, chunk, lane_pool)
                publisher.write(render_chunk(plan, chunk, facts))
                prev_ts = chunk.last_timestamp
                lines += chunk.lines
                rows += chunk.rows
                reads += chunk.reads
                blocks += chunk.raw_blocks
                facts_rows += len(chunk.out_src)
                if on_progress is not None:
                    on_progress(
                        Progress(
                            lines,
                            reads,
                            blocks,
                            chunk.source_offset,
                            bytes_total,
                            time.perf_counter() - start,
                        )
                    )
            if rows == 0:
                raise ReplayError(
                    f"failed to load/replay trace: No optimizer traces loaded from file: {path}", path=path
                )
            if reads == 0:
                raise ReplayError("trace contains no valid Request/Get events", path=path)
            publisher.commit()
    except TraceError as exc:
        raise ReplayError(f"failed to load/replay trace: {exc}", path=path, line=exc.line) from None
    except PublishError as exc:
        raise ReplayError(str(exc)) from None
    finally:
        lane_stats = [_lane_stats(r) for r in runners]
        for runner in runners:
            runner.close()
    return ReplayResult(
        facts_path=out_dir / FACTS_FILE,
        trace_format=fmt,
        lines=lines,
        rows=rows,
        reads=reads,
        facts_rows=facts_rows,
        blocks=blocks,
        elapsed_s=time.perf_counter() - start,
        lanes=lane_stats,
    )


def _run_lanes(runners: list[LaneRunner], chunk: ChunkPlan, pool: ThreadPoolExecutor) -> list[LaneFacts]:
    if len(runners) == 1:
        return [runners[0].run(chunk.lanes[0])]
    return list(pool.map(lambda pair: pair[0].run(pair[1]), zip(runners, chunk.lanes, strict=True)))


def _lane_stats(runner: LaneRunner) -> LaneStats:
    stats = runner.core.stats()
    return LaneStats(
        instance_id=runner.spec.instance_id,
        requests=runner.requests,
        blocks=runner.blocks,
        unique_blocks=stats.unique_blocks,
        memory_bytes=stats.memory_bytes,
        expired_blocks=stats.expired_blocks,
    )
