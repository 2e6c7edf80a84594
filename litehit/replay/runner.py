"""The in-process replay runner: stream the trace, replay every lane, publish the facts.

    trace file --chunks--> scan (threads) --> plan (route + normalize) --> lanes --> render
                                                                   --> litehit_facts.csv.tmp --> rename

Fail-fast: the first malformed row, unsorted timestamp, unknown instance or length-contract
violation (in input order) aborts the replay and nothing is published. Output bytes do not
depend on pipeline_worker_count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from litehit.errors import PublishError, ReplayError
from litehit.publish import AtomicPublisher
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.lanes import LaneFacts, LaneRunner, LaneStats
from litehit.replay.plan import ChunkPlan, make_plan
from litehit.replay.render import header_for, render_chunk
from litehit.spec import ReplaySpec, TraceFormat
from litehit.traces.source import CHUNK_BYTES

__all__ = ["FACTS_FILE", "ReplayResult", "run_replay"]

FACTS_FILE = "litehit_facts.csv"


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
    plan = make_plan(spec, resolve_format(spec, path), path)
    out_dir = Path(spec.output_result_path)
    runners = [LaneRunner(lane, keep_expired=plan.extended) for lane in plan.lanes]
    chunks = TraceChunks(spec, plan, on_progress=on_progress, should_stop=should_stop, chunk_bytes=chunk_bytes)
    facts_rows = 0
    try:
        with (
            AtomicPublisher(out_dir / FACTS_FILE) as publisher,
            ThreadPoolExecutor(max_workers=min(len(runners), spec.workers)) as lane_pool,
        ):
            publisher.write(header_for(plan.extended))
            for chunk in chunks:
                facts = _run_lanes(runners, chunk, lane_pool)
                publisher.write(render_chunk(plan, chunk, facts))
                facts_rows += len(chunk.out_src)
            publisher.commit()
    except PublishError as exc:
        raise ReplayError(str(exc)) from None
    finally:
        lane_stats = [runner.stats() for runner in runners]
        for runner in runners:
            runner.close()
    return ReplayResult(
        facts_path=out_dir / FACTS_FILE,
        trace_format=plan.fmt,
        lines=chunks.lines,
        rows=chunks.rows,
        reads=chunks.reads,
        facts_rows=facts_rows,
        blocks=chunks.blocks,
        elapsed_s=time.perf_counter() - start,
        lanes=lane_stats,
    )


def _run_lanes(runners: list[LaneRunner], chunk: ChunkPlan, pool: ThreadPoolExecutor) -> list[LaneFacts]:
    if len(runners) == 1:
        return [runners[0].run(chunk.lanes[0])]
    return list(pool.map(lambda pair: pair[0].run(pair[1]), zip(runners, chunk.lanes, strict=True)))
