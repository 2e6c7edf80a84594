"""The work folder of a job over a trace, for workers on several machines:

    parse_stage   trace -> scan + validate + route + normalize ONCE -> rows.bin + lane-<i>.in
    a part        lane-<i>.in -> its run -> [part-<k>.out: arrays per chunk] [part-<k>-<name>.npy]
    the merge     rows.bin + lane-<i>.in + every part-<k>.out, chunk by chunk in input order

A fanout's lanes of one block size and key hashing have the same requests: only the first of them
has a lane-<i>.in, which the others read (ParseManifest.lane_file).

Every file streams chunk by chunk (memory independent of trace length) and is written with
tmp-then-rename, so a rerun after a crash simply redoes the stage. litehit.jobs.stored runs the
parts and the merge over these files; the bytes published equal the in-process run's.

Stage files are sequences of numpy arrays (``np.lib.format``), one group per chunk.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from litehit.errors import ReplayError
from litehit.replay.chunks import Progress, TraceChunks, resolve_format
from litehit.replay.plan import ChunkPlan, LaneWork, ReplayPlan, make_plan
from litehit.spec import ReplaySpec, TraceFormat
from litehit.traces.source import CHUNK_BYTES

__all__ = [
    "ParseManifest",
    "atomic_files",
    "iter_lane_work",
    "iter_stored_chunks",
    "lane_input",
    "parse_stage",
    "part_arrays",
    "part_output",
    "read_arrays",
    "read_lane_work",
    "read_manifest",
    "stored_plan",
    "write_arrays",
]

MANIFEST = "manifest.json"
ROWS = "rows.bin"


def lane_input(workdir: Path, lane: int) -> Path:
    return workdir / f"lane-{lane}.in"


def part_output(workdir: Path, part: int) -> Path:
    """The arrays a part emitted per chunk (kinds with chunk_arrays)."""
    return workdir / f"part-{part}.out"


def part_arrays(workdir: Path, part: int, name: str) -> Path:
    """One named array of a part's output."""
    return workdir / f"part-{part}-{name}.npy"


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
    lane_files: list[int] | None = None  # lane i's requests are in lane-<lane_files[i]>.in (None: its own)

    def lane_file(self, workdir: Path, lane: int) -> Path:
        """The file of lane's requests: a fanout's lanes of one block size and key hashing share one."""
        return lane_input(workdir, self.lane_files[lane] if self.lane_files is not None else lane)


SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")
"""numpy's OSError for a write the file system cut short (no errno): the storage filled up."""


def write_arrays(f: BinaryIO, *arrays: Any) -> None:
    """Appends the arrays to a stage file. A write the storage cut short is an ENOSPC naming the
    file (as atomic_files renames it), so the job's error says which file did not fit."""
    for a in arrays:
        try:
            np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)
        except OSError as exc:
            if exc.errno is None and SHORT_WRITE.search(str(exc)):
                name = re.sub(r"\.[0-9a-f]{12}\.tmp$", "", str(getattr(f, "name", "")))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name) from exc
            raise


_NPY_V1 = b"\x93NUMPY\x01\x00"
_PLAIN_HEADER = re.compile(
    rb"\{'descr': '([<>|][biuf][1248])', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \} *\n"
)
"""The header write_array gives a C-ordered array of a plain number type (format 1.0)."""


def read_arrays(f: BinaryIO, n: int) -> list[Any]:
    """The next n arrays of a stage file. Headers as write_arrays writes them are read here (the
    general reader parses each as a Python literal, which took a third of a merge's time); any
    other goes to np.lib.format.read_array."""
    return [_read_array(f) for _ in range(n)]


def _read_array(f: BinaryIO) -> Any:
    start = f.tell()
    lead = f.read(10)
    if len(lead) == 10 and lead[:8] == _NPY_V1:
        header = f.read(int.from_bytes(lead[8:], "little"))
        plain = _PLAIN_HEADER.fullmatch(header)
        if plain is not None:
            dtype = np.dtype(plain.group(1).decode())
            shape = tuple(int(x) for x in plain.group(2).split(b",") if x.strip())
            count = int(np.prod(shape, dtype=np.int64))
            array = np.fromfile(f, dtype=dtype, count=count)
            if array.size != count:
                raise ValueError(f"EOF: reading array data, expected {count} items and got {array.size}")
            return array.reshape(shape)
    f.seek(start)
    return np.lib.format.read_array(f, allow_pickle=False)


@contextlib.contextmanager
def atomic_files(paths: list[Path]) -> Iterator[list[BinaryIO]]:
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
    written = sorted(set(plan.inputs))  # a lane whose requests another lane has is not written again
    file_of = {lane: 1 + k for k, lane in enumerate(written)}
    outputs = [workdir / ROWS] + [lane_input(workdir, lane) for lane in written]
    with atomic_files(outputs) as files:
        for chunk in chunks:
            rows = np.frombuffer(chunk.ids, dtype=np.uint8)
            write_arrays(
                files[0], rows, chunk.id_offsets, chunk.timestamps, chunk.out_src, chunk.out_lane, chunk.out_pos
            )
            for i, work in enumerate(chunk.lanes):
                if i in file_of:
                    write_arrays(files[file_of[i]], *_lane_arrays(work))
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
        list(plan.inputs),
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


def stored_plan(spec: ReplaySpec, manifest: ParseManifest) -> ReplayPlan:
    """The plan of the parsed trace: its format, and its categories in id order."""
    plan = make_plan(spec, TraceFormat(manifest.trace_format))
    for name in manifest.categories:
        plan.categories.id_of(name)
    return plan


def _lane_arrays(work: LaneWork) -> tuple[Any, ...]:
    return work.keys, work.offsets, work.input_lens, work.timestamps, work.categories


def read_lane_work(f: BinaryIO) -> LaneWork:
    """The next chunk's LaneWork from a lane-<i>.in file."""
    return LaneWork(*read_arrays(f, len(LaneWork.__slots__)))


def iter_lane_work(workdir: Path, manifest: ParseManifest, lane: int) -> Iterator[LaneWork]:
    """The LaneWork of every chunk of one lane, in order, from the parse stage's output."""
    with manifest.lane_file(workdir, lane).open("rb") as src:
        for _ in range(manifest.chunks):
            yield read_lane_work(src)


def iter_stored_chunks(
    workdir: Path, plan: ReplayPlan, manifest: ParseManifest, arrays: Sequence[int]
) -> Iterator[tuple[ChunkPlan, list[tuple[Any, ...]]]]:
    """Every chunk of the parsed trace in input order, with the arrays each part emitted for it
    (``arrays[k]`` of them for part k; a part with 0 emits none and gets an empty tuple).
    ReplayError when a file is missing or unreadable."""
    try:
        with contextlib.ExitStack() as stack:
            rows_f = stack.enter_context((workdir / ROWS).open("rb"))
            paths = [manifest.lane_file(workdir, i) for i in range(len(plan.lanes))]
            ins = {path: stack.enter_context(path.open("rb")) for path in sorted(set(paths))}  # one reader per file
            outs = [
                stack.enter_context(part_output(workdir, k).open("rb")) if count else None
                for k, count in enumerate(arrays)
            ]
            for index in range(manifest.chunks):
                ids, id_offsets, timestamps, out_src, out_lane, out_pos = read_arrays(rows_f, 6)
                read = {path: read_lane_work(f) for path, f in ins.items()}
                works = tuple(read[path] for path in paths)
                outputs = [
                    tuple(read_arrays(f, count)) if f is not None else () for f, count in zip(outs, arrays, strict=True)
                ]
                chunk = ChunkPlan(
                    index, ids.tobytes(), id_offsets, timestamps, out_src, out_lane, out_pos, works, 0, 0, 0, None, 0, 0
                )
                yield chunk, outputs
    except (OSError, ValueError) as exc:
        raise ReplayError(f"stage files in {workdir} are missing or unreadable: {exc}") from None
