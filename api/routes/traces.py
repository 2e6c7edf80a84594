"""Trace uploads: streamed into shared storage, size-limited, sha256 recorded, format sniffed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import select

from api.deps import SessionDep, SettingsDep, StorageDep
from api.errors import ApiError
from api.routes.common import paginate
from api.schemas import ErrorResponse, Page, TracePublic
from litehit.db.models import Trace, new_id
from litehit.errors import LiteHitError
from litehit.traces.formats import detect_format
from litehit.traces.source import GZIP_MAGIC, ZSTD_MAGIC

router = APIRouter(prefix="/traces", tags=["traces"])


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
    directory = storage.upload_dir(trace_id)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / storage.safe_name(name)
    tmp = final.with_name(final.name + ".part")
    digest, size, head = hashlib.sha256(), 0, b""
    try:
        with tmp.open("wb") as f:
            async for piece in request.stream():
                size += len(piece)
                if size > limit:
                    raise ApiError(413, "payload_too_large", f"the upload exceeds the limit of {limit} bytes")
                if len(head) < 4:
                    head += piece[:4]
                digest.update(piece)
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        if size == 0:
            raise ApiError(422, "empty_upload", "the request body is empty")
        try:
            fmt = detect_format(tmp)
        except LiteHitError as exc:
            raise ApiError(422, "unknown_trace_format", str(exc).replace(str(tmp), final.name)) from None
        if fmt is None:
            raise ApiError(422, "unknown_trace_format", "the trace has no rows")
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    compression = "gzip" if head.startswith(GZIP_MAGIC) else "zstd" if head.startswith(ZSTD_MAGIC) else "none"
    trace = Trace(
        id=trace_id,
        name=final.name,
        path=storage.relative(final),
        size_bytes=size,
        sha256=digest.hexdigest(),
        compression=compression,
        trace_format=str(fmt),
    )
    session.add(trace)
    session.commit()
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
    trace = session.get(Trace, trace_id)
    if trace is None:
        raise ApiError(404, "not_found", f"no trace with id {trace_id}")
    return trace
