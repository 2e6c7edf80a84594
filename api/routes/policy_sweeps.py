"""Policy sweeps: each lane under LRU, FIFO, LFU, GDFS and WA at fixed capacities, one task per
simulation; results in SQL (one row per lane x policy x capacity) and policies.json + a plot."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import FileResponse
from sqlalchemy import select

from api.deps import EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.routes.common import JOBS, accepted, cancel_job, fast_json, job_or_404, job_row, paginate, run_rows
from api.schemas import ErrorResponse, Page, PolicySweepCreate, PolicySweepPublic
from litehit.db.states import JobState
from litehit.storage import SWEEP_PLOT_FILE, SWEEP_RESULT_FILE
from worker.errors import IdempotencyConflict
from worker.jobs.submit import SWEEP_KIND, SWEEP_PARSE_TASK, create_sweep_job

router = APIRouter(prefix="/policy-sweeps", tags=["policy-sweeps"])


def sweep_view(job: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    links = {}
    if job["state"] == JobState.SUCCEEDED:
        base = f"/v1/policy-sweeps/{job['id']}"
        links = {"result": f"{base}/result.json", "plot": f"{base}/plot.png"}
    return {**job, "runs": runs, "links": links}


def load_sweep(session: Any, job_id: str) -> dict[str, Any]:
    return sweep_view(job_row(session, job_id, SWEEP_KIND), run_rows(session, [job_id])[job_id])


@router.post(
    "",
    status_code=202,
    response_model=PolicySweepPublic,
    responses={
        200: {"model": PolicySweepPublic, "description": "an existing job (same Idempotency-Key)"},
        409: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
    },
    summary="Submit a policy sweep (a replay config plus the policies and capacities to simulate)",
)
def create_sweep(
    body: PolicySweepCreate,
    response: Response,
    session: SessionDep,
    storage: StorageDep,
    enqueue: EnqueueDep,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> dict[str, Any]:
    config = body.model_dump(exclude={"trace_id", "sweep"}, exclude_unset=True, exclude_none=True)
    sweep = body.sweep.model_dump(mode="json")
    try:
        job, created = create_sweep_job(
            session, storage, config, sweep, trace_id=body.trace_id, idempotency_key=idempotency_key
        )
    except IdempotencyConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    accepted(session, enqueue, response, job, created, SWEEP_PARSE_TASK, f"/v1/policy-sweeps/{job.id}")
    return load_sweep(session, job.id)


@router.get("", response_model=Page[PolicySweepPublic], summary="List policy sweeps, newest first")
def list_sweeps(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    query = select(JOBS).where(JOBS.c.kind == SWEEP_KIND).order_by(JOBS.c.created_at.desc(), JOBS.c.id)
    items, total, next_offset = paginate(session, query, limit, offset, rows=True)
    runs = run_rows(session, [j["id"] for j in items])
    views = [sweep_view(j, runs[j["id"]]) for j in items]
    return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}


@router.get("/{job_id}", response_model=PolicySweepPublic, responses={404: {"model": ErrorResponse}})
def get_sweep(job_id: str, session: SessionDep) -> Response:
    return fast_json(PolicySweepPublic, load_sweep(session, job_id))


def _file(session: SessionDep, storage: StorageDep, job_id: str, name: str, media: str) -> FileResponse:
    job = job_or_404(session, job_id, SWEEP_KIND)
    if job.state != JobState.SUCCEEDED or not job.output_path:
        raise ApiError(409, "not_ready", f"the sweep is {job.state}; results exist only once it succeeded")
    return FileResponse(storage.absolute(job.output_path).with_name(name), media_type=media)


@router.get(
    "/{job_id}/result.json",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/json": {}}},
        404: {"model": ErrorResponse},
        409: {"model": ErrorResponse},
    },
    summary="policies.json: every lane x policy x capacity (the same bytes as `litehit policies -o`)",
)
def get_result(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return _file(session, storage, job_id, SWEEP_RESULT_FILE, "application/json")


@router.get(
    "/{job_id}/plot.png",
    response_class=FileResponse,
    responses={200: {"content": {"image/png": {}}}, 404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Hit ratio over capacity, one line per policy, one panel per lane",
)
def get_plot(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return _file(session, storage, job_id, SWEEP_PLOT_FILE, "image/png")


@router.delete(
    "/{job_id}",
    response_model=PolicySweepPublic,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
    summary="Cancel a queued or running sweep",
)
def cancel_sweep(job_id: str, session: SessionDep, storage: StorageDep) -> dict[str, Any]:
    cancel_job(session, storage, job_or_404(session, job_id, SWEEP_KIND), "sweep")
    return load_sweep(session, job_id)
