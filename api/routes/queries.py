"""Query jobs: capacities over published facts; summaries from SQL, files from storage."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import FileResponse
from sqlalchemy import select

from api.deps import ADMITTED, EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.examples import QUERY_EXAMPLES
from api.routes.common import BUSY, JOBS, accepted, fast_json, job_or_404, job_row, paginate, submitted, summary_rows
from api.schemas import ErrorResponse, Page, QueryCreate, QueryPublic
from litehit.db.states import JobState
from litehit.storage import CURVE_FILE, PLOT_FILE, REQUESTS_FILE
from worker.errors import IdempotencyConflict
from worker.jobs.submit import QUERY_TASK, create_query_job

router = APIRouter(prefix="/queries", tags=["queries"])


def query_view(job: dict[str, Any], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The job with its summaries: per instance, the total over all instances when they share
    one setup (or their setups are unknown), and one total per setup (litehit.setups)."""
    instances: dict[str, dict[str, Any]] = {}
    totals: dict[str, dict[str, Any]] = {}  # setup key ("" for the one total) -> summary
    for row in summaries:
        group = totals if row["is_total"] else instances
        entry = group.get(row["instance_id"])
        if entry is None:
            entry = group[row["instance_id"]] = {
                "instance_id": None if row["is_total"] else row["instance_id"],
                "requests": row["requests"],
                "total_input_tokens": row["total_input_tokens"],
                "capacity_gb": [],
                "capacities": [],
                "total_hit_blocks": [],
                "total_hit_tokens": [],
                "hit_rates": [],
            }
        entry["capacity_gb"].append(row["capacity_gb"])
        entry["capacities"].append(row["capacity"])
        entry["total_hit_blocks"].append(row["total_hit_blocks"])
        entry["total_hit_tokens"].append(row["total_hit_tokens"])
        entry["hit_rates"].append(row["hit_rate"])
    setups = (job.get("stats") or {}).get("setups") or []
    per_setup = [
        {**totals[s["key"]], **{k: s[k] for k in ("block_size", "block_bytes", "ttl_seconds", "instances")}}
        for s in setups
        if s.get("key") in totals
    ]
    links = {}
    if job["state"] == JobState.SUCCEEDED:
        base = f"/v1/queries/{job['id']}"
        links = {"requests": f"{base}/requests", "curve": f"{base}/curve", "plot": f"{base}/plot.png"}
    ordered = [instances[k] for k in sorted(instances, key=lambda s: s.encode())]
    return {
        **job,
        "replay_id": job["parent_id"],
        "instances": ordered,
        "total": totals.get(""),
        "totals": per_setup,
        "links": links,
    }


def load_query(session: Any, job_id: str) -> dict[str, Any]:
    return query_view(job_row(session, job_id, "query"), summary_rows(session, [job_id])[job_id])


@router.post(
    "",
    status_code=202,
    response_model=QueryPublic,
    responses={200: {"model": QueryPublic}, 409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}, **BUSY},
    summary="Queue a capacity query over a replay's facts",
    dependencies=[ADMITTED],
)
def create_query(
    body: Annotated[QueryCreate, Body(openapi_examples=QUERY_EXAMPLES)],
    response: Response,
    session: SessionDep,
    storage: StorageDep,
    enqueue: EnqueueDep,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> Response:
    try:
        job, created = create_query_job(
            session,
            storage,
            capacity_gb=body.capacity_gb,
            replay_id=body.replay_id,
            facts_path=body.facts_path,
            targets=body.targets,
            idempotency_key=idempotency_key,
        )
    except IdempotencyConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    accepted(session, enqueue, response, job, created, QUERY_TASK, f"/v1/queries/{job.id}")
    return submitted(QueryPublic, load_query(session, job.id), response)


@router.get("", response_model=Page[QueryPublic], summary="List query jobs, newest first")
def list_queries(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    query = select(JOBS).where(JOBS.c.kind == "query").order_by(JOBS.c.created_at.desc(), JOBS.c.id)
    items, total, next_offset = paginate(session, query, limit, offset, rows=True)
    summaries = summary_rows(session, [j["id"] for j in items])
    views = [query_view(j, summaries[j["id"]]) for j in items]
    return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}


@router.get("/{job_id}", response_model=QueryPublic, responses={404: {"model": ErrorResponse}})
def get_query(job_id: str, session: SessionDep) -> Response:
    return fast_json(QueryPublic, load_query(session, job_id))


def _file(session: SessionDep, storage: StorageDep, job_id: str, name: str, media: str) -> FileResponse:
    job = job_or_404(session, job_id, "query")
    if job.state != JobState.SUCCEEDED or not job.output_path:
        raise ApiError(409, "not_ready", f"the query is {job.state}; results exist only once it succeeded")
    return FileResponse(storage.absolute(job.output_path) / name, media_type=media)


@router.get(
    "/{job_id}/requests",
    response_class=FileResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
    summary="Per-request JSONL (the original facts query output), streamed",
)
def get_requests(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return _file(session, storage, job_id, REQUESTS_FILE, "application/x-ndjson")


@router.get(
    "/{job_id}/curve",
    response_class=FileResponse,
    responses={200: {"content": {"application/json": {}}}},
    summary="The exact hit-rate curve of every instance",
)
def get_curve(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return _file(session, storage, job_id, CURVE_FILE, "application/json")


@router.get(
    "/{job_id}/plot.png",
    response_class=FileResponse,
    responses={200: {"content": {"image/png": {}}}},
    summary="Hit rate vs capacity (PNG)",
)
def get_plot(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
    return _file(session, storage, job_id, PLOT_FILE, "image/png")
