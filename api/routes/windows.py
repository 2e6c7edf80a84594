"""Window sizings: every lane simulated at one capacity under one policy, one task per lane; the
eviction-attribution window per lane in SQL (one row per lane) and window.json + a plot."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import FileResponse
from sqlalchemy import select

from api.deps import EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.routes.common import (
    JOBS,
    accepted,
    cancel_job,
    fast_json,
    job_file,
    job_or_404,
    job_row,
    paginate,
    window_lane_rows,
)
from api.schemas import ErrorResponse, Page, WindowCreate, WindowPublic
from litehit.db.states import JobState
from litehit.storage import WINDOW_PLOT_FILE, WINDOW_RESULT_FILE
from worker.errors import IdempotencyConflict
from worker.jobs.submit import WINDOW_KIND, WINDOW_PARSE_TASK, create_window_job

router = APIRouter(prefix="/windows", tags=["windows"])


def window_view(job: dict[str, Any], lanes: list[dict[str, Any]]) -> dict[str, Any]:
    links = {}
    if job["state"] == JobState.SUCCEEDED:
        base = f"/v1/windows/{job['id']}"
        links = {"result": f"{base}/window.json", "plot": f"{base}/plot.png"}
    return {**job, "lanes": lanes, "links": links}


def load_window(session: Any, job_id: str) -> dict[str, Any]:
    return window_view(job_row(session, job_id, WINDOW_KIND), window_lane_rows(session, [job_id])[job_id])


@router.post(
    "",
    status_code=202,
    response_model=WindowPublic,
    responses={
        200: {"model": WindowPublic, "description": "an existing job (same Idempotency-Key)"},
        409: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
    },
    summary="Submit a window sizing (a replay config plus the capacity, policy and coverage target)",
)
def create_window(
    body: WindowCreate,
    response: Response,
    session: SessionDep,
    storage: StorageDep,
    enqueue: EnqueueDep,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> dict[str, Any]:
    config = body.model_dump(exclude={"trace_id", "window"}, exclude_unset=True, exclude_none=True)
    window = body.window.model_dump(mode="json")
    try:
        job, created = create_window_job(
            session, storage, config, window, trace_id=body.trace_id, idempotency_key=idempotency_key
        )
    except IdempotencyConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    accepted(session, enqueue, response, job, created, WINDOW_PARSE_TASK, f"/v1/windows/{job.id}")
    return load_window(session, job.id)


@router.get("", response_model=Page[WindowPublic], summary="List window sizings, newest first")
def list_windows(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    query = select(JOBS).where(JOBS.c.kind == WINDOW_KIND).order_by(JOBS.c.created_at.desc(), JOBS.c.id)
    items, total, next_offset = paginate(session, query, limit, offset, rows=True)
    lanes = window_lane_rows(session, [j["id"] for j in items])
    views = [window_view(j, lanes[j["id"]]) for j in items]
    return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}


@router.get("/{job_id}", response_model=WindowPublic, responses={404: {"model": ErrorResponse}})
def get_window(job_id: str, session: SessionDep) -> Response:
    return fast_json(WindowPublic, load_window(session, job_id))


@router.get(
    "/{job_id}/window.json",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/json": {}}},
        404: {"model": ErrorResponse},
        409: {"model": ErrorResponse},
    },
    summary="window.json: every lane and all lanes together (the same bytes as `litehit window -o`)",
)
def get_result(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return job_file(session, storage, job_id, WINDOW_KIND, WINDOW_RESULT_FILE, "application/json")


@router.get(
    "/{job_id}/plot.png",
    response_class=FileResponse,
    responses={200: {"content": {"image/png": {}}}, 404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Coverage of evicted misses over window length (log x), one panel per lane",
)
def get_plot(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return job_file(session, storage, job_id, WINDOW_KIND, WINDOW_PLOT_FILE, "image/png")


@router.delete(
    "/{job_id}",
    response_model=WindowPublic,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Cancel a queued or running window sizing",
)
def cancel_window(job_id: str, session: SessionDep, storage: StorageDep) -> dict[str, Any]:
    cancel_job(session, storage, job_or_404(session, job_id, WINDOW_KIND), "window sizing")
    return load_window(session, job_id)
