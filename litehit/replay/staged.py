"""The replay as three stages with compact files in between, for workers on several machines:

    parse_stage   trace -> scan + validate + route + normalize ONCE -> rows.bin + lane-<i>.in
    lane_stage    lane-<i>.in -> the lane core -> lane-<i>.out           (one task per lane)
    merge_stage   rows.bin + every lane-<i>.out -> facts rows in input order -> publish

Each stage streams chunk by chunk (memory independent of trace length) and writes its output
with tmp-then-rename, so a rerun after a crash simply redoes the stage. The bytes published
are identical to run_replay's.

Stage files are sequences of numpy arrays (``np.lib.format``), one group per chunk.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from litehit.errors import PublishError, ReplayCancelled, ReplayError
from litehit.publish import AtomicPublisher
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.lanes import LaneFacts, LaneRunner, LaneStats
from litehit.replay.plan import ChunkPlan, LaneWork, ReplayPlan, make_plan
from litehit.replay.render import header_for, render_chunk
from litehit.replay.runner import FACTS_FILE, ReplayResult
from litehit.spec import ReplaySpec, TraceFormat
from litehit.traces.source import CHUNK_BYTES

__all__ = [
    "ParseManifest",
    "iter_lane_work",
    "lane_stage",
    "merge_stage",
    "parse_stage",
    "read_lane_work",
    "read_manifest",
]

MANIFEST = "manifest.json"
ROWS = "rows.bin"


def lane_input(workdir: Path, lane: int) -> Path:
    return workdir / f"lane-{lane}.in"


def lane_output(workdir: Path, lane: int) -> Path:
    return workdir / f"lane-{lane}.out"


@dataclass(frozen=True)
class ParseManifest:
    trace_format: str
    chunks: int
    lines: int
    rows: int
    reads: int
    blocks: int
    lane_requests: list[int]
    lane_blocks: list[int]
    parse_s: float
    categories: list[str] = field(default_factory=list)  # names of the lane files' category ids, in id order


def _write_arrays(f: BinaryIO, *arrays: Any) -> None:
    for a in arrays:
        np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)


def _read_arrays(f: BinaryIO, n: int) -> list[Any]:
    return [np.lib.format.read_array(f, allow_pickle=False) for _ in range(n)]


@contextlib.contextmanager
def _atomic_files(paths: list[Path]) -> Iterator[list[BinaryIO]]:
    """Opens a temporary file per path (unique to this writer, so a second worker redoing the
    same stage never truncates the first one's file); renames them all into place only if the
    block succeeds."""
    tag = uuid.uuid4().hex[:12]
    tmps = [p.with_name(f"{p.name}.{tag}.tmp") for p in paths]
    files: list[BinaryIO] = [t.open("wb") for t in tmps]
    try:
        yield files
        for f in files:
            f.flush()
            os.fsync(f.fileno())
            f.close()
        for tmp, path in zip(tmps, paths, strict=True):
            os.replace(tmp, path)
    finally:
        for f, tmp in zip(files, tmps, strict=True):
            f.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def parse_stage(
    spec: ReplaySpec,
    workdir: Path,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> ParseManifest:
    """Scans, validates, routes and normalizes the whole trace once (fail-fast as run_replay)."""
    start = time.perf_counter()
    path = spec.trace_file_path
    plan = make_plan(spec, resolve_format(spec, path), path)
    workdir.mkdir(parents=True, exist_ok=True)
    n_lanes = len(plan.lanes)
    lane_requests, lane_blocks = [0] * n_lanes, [0] * n_lanes
    chunks = TraceChunks(spec, plan, on_progress=on_progress, should_stop=should_stop, chunk_bytes=chunk_bytes)
    outputs = [workdir / ROWS] + [lane_input(workdir, i) for i in range(n_lanes)]
    with _atomic_files(outputs) as files:
        for chunk in chunks:
            rows = np.frombuffer(chunk.ids, dtype=np.uint8)
            _write_arrays(
                files[0], rows, chunk.id_offsets, chunk.timestamps, chunk.out_src, chunk.out_lane, chunk.out_pos
            )
            for i, work in enumerate(chunk.lanes):
                _write_arrays(files[1 + i], *_lane_arrays(work))
                lane_requests[i] += work.requests
                lane_blocks[i] += len(work.keys)
    manifest = ParseManifest(
        plan.fmt.value,
        chunks.chunks,
        chunks.lines,
        chunks.rows,
        chunks.reads,
        chunks.blocks,
        lane_requests,
        lane_blocks,
        time.perf_counter() - start,
        list(plan.categories.names),
    )
    tmp = workdir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(asdict(manifest)))
    os.replace(tmp, workdir / MANIFEST)
    return manifest


def read_manifest(workdir: Path) -> ParseManifest:
    try:
        return ParseManifest(**json.loads((workdir / MANIFEST).read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise ReplayError(f"the parse stage output in {workdir} is missing or unreadable: {exc}") from None


def _plan(spec: ReplaySpec, manifest: ParseManifest) -> ReplayPlan:
    plan = make_plan(spec, TraceFormat(manifest.trace_format))
    for name in manifest.categories:
        plan.categories.id_of(name)
    return plan


def _lane_arrays(work: LaneWork) -> tuple[Any, ...]:
    return work.keys, work.offsets, work.input_lens, work.timestamps, work.categories


def read_lane_work(f: BinaryIO) -> LaneWork:
    """The next chunk's LaneWork from a lane-<i>.in file."""
    return LaneWork(*_read_arrays(f, len(LaneWork.__slots__)))


def iter_lane_work(workdir: Path, lane: int, chunks: int) -> Iterator[LaneWork]:
    """The LaneWork of every chunk of one lane, in order, from the parse stage's output."""
    with lane_input(workdir, lane).open("rb") as src:
        for _ in range(chunks):
            yield read_lane_work(src)


def lane_stage(
    spec: ReplaySpec,
    workdir: Path,
    lane: int,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LaneStats:
    """Replays one lane's requests in order; writes lane-<i>.out. on_progress(requests, blocks)."""
    manifest = read_manifest(workdir)
    plan = _plan(spec, manifest)
    runner = LaneRunner(plan.lanes[lane], keep_expired=plan.extended)
    try:
        with lane_input(workdir, lane).open("rb") as src, _atomic_files([lane_output(workdir, lane)]) as (dst,):
            for _ in range(manifest.chunks):
                if should_stop is not None and should_stop():
                    raise ReplayCancelled("cancelled; nothing was published")
                facts = runner.run(read_lane_work(src))
                _write_arrays(dst, facts.segments, facts.seg_offsets, facts.cuts)
                if on_progress is not None:
                    on_progress(runner.requests, runner.blocks)
        return runner.stats()
    except (OSError, ValueError) as exc:
        raise ReplayError(f"lane {plan.lanes[lane].instance_id}: stage files unreadable: {exc}") from None
    finally:
        runner.close()


def merge_stage(spec: ReplaySpec, workdir: Path, *, lanes: list[LaneStats] | None = None) -> ReplayResult:
    """Merges the lane outputs in input order and publishes litehit_facts.csv atomically."""
    start = time.perf_counter()
    manifest = read_manifest(workdir)
    plan = _plan(spec, manifest)
    n_lanes = len(plan.lanes)
    out_dir = Path(spec.output_result_path)
    facts_rows = 0
    try:
        with contextlib.ExitStack() as stack:
            publisher = stack.enter_context(AtomicPublisher(out_dir / FACTS_FILE))
            rows_f = stack.enter_context((workdir / ROWS).open("rb"))
            ins = [stack.enter_context(lane_input(workdir, i).open("rb")) for i in range(n_lanes)]
            outs = [stack.enter_context(lane_output(workdir, i).open("rb")) for i in range(n_lanes)]
            publisher.write(header_for(plan.extended))
            for index in range(manifest.chunks):
                ids, id_offsets, timestamps, out_src, out_lane, out_pos = _read_arrays(rows_f, 6)
                works = tuple(read_lane_work(f) for f in ins)
                facts = [LaneFacts(*_read_arrays(f, 3)) for f in outs]
                chunk = ChunkPlan(
                    index, ids.tobytes(), id_offsets, timestamps, out_src, out_lane, out_pos, works, 0, 0, 0, None, 0, 0
                )
                publisher.write(render_chunk(plan, chunk, facts))
                facts_rows += len(out_src)
            publisher.commit()
    except PublishError as exc:
        raise ReplayError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise ReplayError(f"stage files in {workdir} are missing or unreadable: {exc}") from None
    return ReplayResult(
        facts_path=out_dir / FACTS_FILE,
        trace_format=TraceFormat(manifest.trace_format),
        lines=manifest.lines,
        rows=manifest.rows,
        reads=manifest.reads,
        facts_rows=facts_rows,
        blocks=manifest.blocks,
        elapsed_s=manifest.parse_s + time.perf_counter() - start,
        lanes=lanes or [],
    )
