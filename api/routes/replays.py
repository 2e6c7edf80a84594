"""Replay jobs: submit (202 + Location), watch, download the facts, cancel."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import FileResponse
from sqlalchemy import select

from api.deps import ADMITTED, EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.examples import REPLAY_EXAMPLES
from api.routes.common import (
    BUSY,
    JOBS,
    accepted,
    cancel_job,
    fast_json,
    job_or_404,
    job_row,
    lane_rows,
    paginate,
    submitted,
)
from api.schemas import ErrorResponse, Page, ReplayCreate, ReplayPublic
from litehit.db.states import JobState
from worker.errors import IdempotencyConflict
from worker.jobs.submit import PARSE_TASK, create_replay_job

router = APIRouter(prefix="/replays", tags=["replays"])


def replay_view(job: dict[str, Any], lanes: list[dict[str, Any]]) -> dict[str, Any]:
    facts = None
    if job["state"] == JobState.SUCCEEDED and job["output_path"]:
        facts = {"path": job["output_path"], "url": f"/v1/replays/{job['id']}/facts"}
    return {**job, "lanes": lanes, "facts": facts}


def load_replay(session: Any, job_id: str) -> dict[str, Any]:
    return replay_view(job_row(session, job_id, "replay"), lane_rows(session, [job_id])[job_id])


@router.post(
    "",
    status_code=202,
    response_model=ReplayPublic,
    responses={
        200: {"model": ReplayPublic, "description": "an existing job (same Idempotency-Key)"},
        409: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
        **BUSY,
    },
    summary="Submit a replay job (the original offline config; trace by upload id or storage path)",
    dependencies=[ADMITTED],
)
def create_replay(
    body: Annotated[ReplayCreate, Body(openapi_examples=REPLAY_EXAMPLES)],
    response: Response,
    session: SessionDep,
    storage: StorageDep,
    enqueue: EnqueueDep,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> Response:
    config = body.model_dump(exclude={"trace_id"}, exclude_unset=True, exclude_none=True)
    try:
        job, created = create_replay_job(
            session, storage, config, trace_id=body.trace_id, idempotency_key=idempotency_key
        )
    except IdempotencyConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    accepted(session, enqueue, response, job, created, PARSE_TASK, f"/v1/replays/{job.id}")
    return submitted(ReplayPublic, load_replay(session, job.id), response)


@router.get("", response_model=Page[ReplayPublic], summary="List replay jobs, newest first")
def list_replays(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
) -> dict[str, Any]:
    query = select(JOBS).where(JOBS.c.kind == "replay").order_by(JOBS.c.created_at.desc(), JOBS.c.id)
    if state:
        query = query.where(JOBS.c.state == state)
    items, total, next_offset = paginate(session, query, limit, offset, rows=True)
    lanes = lane_rows(session, [j["id"] for j in items])
    views = [replay_view(j, lanes[j["id"]]) for j in items]
    return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}


@router.get("/{job_id}", response_model=ReplayPublic, responses={404: {"model": ErrorResponse}})
def get_replay(job_id: str, session: SessionDep) -> Response:
    return fast_json(ReplayPublic, load_replay(session, job_id))


@router.get(
    "/{job_id}/facts",
    response_class=FileResponse,
    responses={200: {"content": {"text/csv": {}}}, 404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Stream the published facts CSV",
)
def get_facts(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    job = job_or_404(session, job_id, "replay")
    if job.state != JobState.SUCCEEDED or not job.output_path:
        raise ApiError(409, "not_ready", f"the replay is {job.state}; facts exist only once it succeeded")
    return FileResponse(
        storage.absolute(job.output_path), media_type="text/csv", filename=f"litehit_facts_{job.id}.csv"
    )


@router.delete(
    "/{job_id}",
    response_model=ReplayPublic,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Cancel a queued or running replay",
)
def cancel_replay(job_id: str, session: SessionDep, storage: StorageDep) -> dict[str, Any]:
    cancel_job(session, storage, job_or_404(session, job_id, "replay"), "replay")
    return load_replay(session, job_id)
