"""Trace uploads: streamed into shared storage, size-limited, sha256 recorded, format sniffed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
from pathlib import Path
from typing import Annotated, BinaryIO

from fastapi import APIRouter, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from api.deps import SessionDep, SettingsDep, StorageDep
from api.errors import ApiError
from api.routes.common import paginate
from api.schemas import ErrorResponse, Page, TracePublic
from litehit.db.models import Trace, new_id
from litehit.errors import LiteHitError, TraceError
from litehit.jobs.views import findable
from litehit.spec import TraceFormat
from litehit.storage import PART_SUFFIX, Storage
from litehit.traces.formats import detect_format
from litehit.traces.source import BOM, GZIP_MAGIC, READ_ERRORS, ZSTD_MAGIC, open_trace

router = APIRouter(prefix="/traces", tags=["traces"])

WRITE_BATCH_BYTES = 1 << 20  # pieces of the request body are written and hashed in batches of this size
SCAN_BYTES = 1 << 20  # the decompressing scan reads this much at a time
MAX_BLANK_PREFIX = 1 << 20  # the first row must start within this many (decompressed) bytes
BLANK = b" \t\r\n\x0b\x0c"


def scan_decompressed(path: Path, compressed: bool, limit: int) -> bool:
    """Reads a trace as the replay will (decompressed), fast and bounded: whether it has a
    non-blank byte within its first MAX_BLANK_PREFIX bytes (False: no rows at all); 413 once a
    compressed trace decompresses to more than ``limit`` bytes, 422 for a long blank prefix.
    A plain trace is read only up to its first row."""
    total, first_row = 0, -1
    with open_trace(path) as stream:
        while chunk := _read(stream, path):
            if first_row < 0:
                text = chunk[len(BOM) :] if total == 0 and chunk.startswith(BOM) else chunk
                if text.strip(BLANK):
                    first_row = total
                elif total + len(chunk) > MAX_BLANK_PREFIX:
                    raise ApiError(
                        422, "unknown_trace_format", f"the trace starts with more than {MAX_BLANK_PREFIX} blank bytes"
                    )
            total += len(chunk)
            if compressed and total > limit:
                raise ApiError(
                    413, "payload_too_large", f"the trace decompresses to more than the limit of {limit} bytes"
                )
            if first_row >= 0 and not compressed:
                break
    return first_row >= 0


def _read(stream: BinaryIO, path: Path) -> bytes:
    try:
        return stream.read(SCAN_BYTES)
    except READ_ERRORS as exc:
        raise TraceError(str(path), 0, f"cannot read (corrupt or truncated compressed data?): {exc}") from None


class _Upload:
    """An upload received into ``NAME.part`` beside its final name. The event loop only reads
    the request and counts bytes; writing, hashing, fsync and the format check run in worker
    threads, one call at a time."""

    def __init__(self, final: Path, limit: int, decompressed_limit: int) -> None:
        self.final, self.limit, self.decompressed_limit = final, limit, decompressed_limit
        self.tmp = final.with_name(final.name + PART_SUFFIX)
        self.digest = hashlib.sha256()
        self.size, self.head = 0, b""
        self.batch: list[bytes] = []
        self.batch_bytes = 0
        self.file: io.BufferedWriter | None = None

    def open(self) -> None:
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.file = self.tmp.open("wb")
        Storage.lock_part(self.file.fileno())  # the orphan sweep leaves a locked .part alone

    def take(self, piece: bytes) -> bytes | None:
        """Counts a piece of the body (413 past the limit); returns a batch once it is due."""
        self.size += len(piece)
        if self.size > self.limit:
            raise ApiError(413, "payload_too_large", f"the upload exceeds the limit of {self.limit} bytes")
        if len(self.head) < 4:
            self.head += piece[:4]
        self.batch.append(piece)
        self.batch_bytes += len(piece)
        return self.take_batch() if self.batch_bytes >= WRITE_BATCH_BYTES else None

    def take_batch(self) -> bytes:
        data = b"".join(self.batch)
        self.batch.clear()
        self.batch_bytes = 0
        return data

    def write(self, data: bytes) -> None:
        assert self.file is not None
        self.digest.update(data)
        self.file.write(data)

    def finish(self) -> TraceFormat:
        """Writes the rest, makes the file durable, names its format and moves it into place."""
        assert self.file is not None
        with self.file as f:
            self.write(self.take_batch())
            f.flush()
            os.fsync(f.fileno())
        if self.size == 0:
            raise ApiError(422, "empty_upload", "the request body is empty")
        try:
            has_rows = scan_decompressed(self.tmp, self.compression != "none", self.decompressed_limit)
            fmt = detect_format(self.tmp) if has_rows else None
        except LiteHitError as exc:
            raise ApiError(422, "unknown_trace_format", str(exc).replace(str(self.tmp), self.final.name)) from None
        if fmt is None:
            raise ApiError(422, "unknown_trace_format", "the trace has no rows")
        os.replace(self.tmp, self.final)
        return fmt

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()
        shutil.rmtree(self.final.parent, ignore_errors=True)

    @property
    def compression(self) -> str:
        return "gzip" if self.head.startswith(GZIP_MAGIC) else "zstd" if self.head.startswith(ZSTD_MAGIC) else "none"


def _record(session: Session, trace: Trace) -> None:
    session.add(trace)
    session.commit()


@router.post(
    "",
    status_code=201,
    response_model=TracePublic,
    responses={413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
    summary="Upload a trace (raw request body; plain, gzip or zstd)",
)
async def upload_trace(
    request: Request,
    session: SessionDep,
    storage: StorageDep,
    settings: SettingsDep,
    name: Annotated[str, Query(max_length=255, description="file name to keep")] = "trace.jsonl",
) -> Trace:
    """``curl --data-binary @trace.jsonl.gz "http://HOST/v1/traces?name=trace.jsonl.gz"``"""
    limit = settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "payload_too_large", f"the upload is {declared} bytes; the limit is {limit}")
    trace_id = new_id()
    final = storage.upload_dir(trace_id) / storage.safe_name(name)
    upload = _Upload(final, limit, decompressed_limit=settings.max_decompressed_bytes)
    try:
        await run_in_threadpool(upload.open)
        async for piece in request.stream():
            batch = upload.take(piece)
            if batch is not None:
                await run_in_threadpool(upload.write, batch)
        fmt = await run_in_threadpool(upload.finish)
    except BaseException:
        await run_in_threadpool(upload.discard)  # runs to its end even when the request is cancelled
        raise
    trace = Trace(
        id=trace_id,
        name=upload.final.name,
        path=storage.relative(upload.final),
        size_bytes=upload.size,
        sha256=upload.digest.hexdigest(),
        compression=upload.compression,
        trace_format=str(fmt),
    )
    await run_in_threadpool(_record, session, trace)
    return trace


@router.get("", response_model=Page[TracePublic], summary="List uploaded traces, newest first")
def list_traces(
    session: SessionDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, object]:
    items, total, next_offset = paginate(
        session, select(Trace).order_by(Trace.created_at.desc(), Trace.id), limit, offset
    )
    return {"items": items, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}


@router.get("/{trace_id}", response_model=TracePublic, responses={404: {"model": ErrorResponse}})
def get_trace(trace_id: str, session: SessionDep) -> Trace:
    trace = session.get(Trace, trace_id) if findable(trace_id) else None
    if trace is None:
        raise ApiError(404, "not_found", f"no trace with id {trace_id}")
    return trace
