"""The routes every analysis job over a replay config shares (policy sweeps, window sizings): submit
(a replay config plus the analysis's options under one field), list, get with its part rows from
SQL, its two published files (result JSON and plot), cancel. Each resource states only what differs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.deps import EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.routes.common import JOBS, accepted, cancel_job, fast_json, job_file, job_or_404, job_row, paginate
from api.schemas import ErrorResponse, Page
from litehit.db.states import JobState
from worker.errors import IdempotencyConflict

__all__ = ["AnalysisJob", "analysis_job_router"]

CreateJob = Callable[..., tuple[Any, bool]]  # (session, storage, config, options, *, trace_id, idempotency_key)


@dataclass(frozen=True)
class AnalysisJob:
    prefix: str  # "/policy-sweeps"
    what: str  # "policy sweep", for summaries and messages
    kind: str  # Job.kind
    options_field: str  # the body field holding the analysis's options ("sweep", "window")
    parts_field: str  # the view field of the part rows ("runs", "lanes")
    create_model: type[BaseModel]
    public_model: type[BaseModel]
    create: CreateJob
    first_task: str
    part_rows: Callable[[Session, list[str]], dict[str, list[dict[str, Any]]]]
    result_route: str  # the result JSON is served at /{id}/<result_route>
    result_file: str  # ... from this published file
    plot_file: str  # the published plot, served at /{id}/plot.png
    result_summary: str
    plot_summary: str


def analysis_job_router(spec: AnalysisJob) -> APIRouter:
    router = APIRouter(prefix=spec.prefix, tags=[spec.prefix.strip("/")])
    public = spec.public_model

    def view(job: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
        links = {}
        if job["state"] == JobState.SUCCEEDED:
            base = f"/v1{spec.prefix}/{job['id']}"
            links = {"result": f"{base}/{spec.result_route}", "plot": f"{base}/plot.png"}
        return {**job, spec.parts_field: parts, "links": links}

    def load(session: Session, job_id: str) -> dict[str, Any]:
        return view(job_row(session, job_id, spec.kind), spec.part_rows(session, [job_id])[job_id])

    def create(
        body: Any,
        response: Response,
        session: SessionDep,
        storage: StorageDep,
        enqueue: EnqueueDep,
        idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
    ) -> dict[str, Any]:
        config = body.model_dump(exclude={"trace_id", spec.options_field}, exclude_unset=True, exclude_none=True)
        options = getattr(body, spec.options_field).model_dump(mode="json")
        try:
            job, created = spec.create(
                session, storage, config, options, trace_id=body.trace_id, idempotency_key=idempotency_key
            )
        except IdempotencyConflict as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        accepted(session, enqueue, response, job, created, spec.first_task, f"/v1{spec.prefix}/{job.id}")
        return load(session, job.id)

    create.__annotations__["body"] = spec.create_model  # the resource's own request model
    router.post(
        "",
        status_code=202,
        response_model=public,
        responses={
            200: {"model": public, "description": "an existing job (same Idempotency-Key)"},
            409: {"model": ErrorResponse},
            422: {"model": ErrorResponse},
        },
        summary=f"Submit a {spec.what} (a replay config plus its options under `{spec.options_field}`)",
        name=f"create_{spec.kind}",
    )(create)

    @router.get("", response_model=Page[public], summary=f"List {spec.what}s, newest first")  # type: ignore[valid-type]
    def list_jobs(
        session: SessionDep,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        query = select(JOBS).where(JOBS.c.kind == spec.kind).order_by(JOBS.c.created_at.desc(), JOBS.c.id)
        items, total, next_offset = paginate(session, query, limit, offset, rows=True)
        parts = spec.part_rows(session, [j["id"] for j in items])
        views = [view(j, parts[j["id"]]) for j in items]
        return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}

    @router.get("/{job_id}", response_model=public, responses={404: {"model": ErrorResponse}})
    def get_job(job_id: str, session: SessionDep) -> Response:
        return fast_json(public, load(session, job_id))

    files: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}}

    @router.get(
        f"/{{job_id}}/{spec.result_route}",
        response_class=FileResponse,
        responses={200: {"content": {"application/json": {}}}, **files},
        summary=spec.result_summary,
    )
    def get_result(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
        return job_file(session, storage, job_id, spec.kind, spec.result_file, "application/json")

    @router.get(
        "/{job_id}/plot.png",
        response_class=FileResponse,
        responses={200: {"content": {"image/png": {}}}, **files},
        summary=spec.plot_summary,
    )
    def get_plot(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
        return job_file(session, storage, job_id, spec.kind, spec.plot_file, "image/png")

    @router.delete(
        "/{job_id}",
        response_model=public,
        responses=files,
        summary=f"Cancel a queued or running {spec.what}",
    )
    def cancel(job_id: str, session: SessionDep, storage: StorageDep) -> dict[str, Any]:
        cancel_job(session, storage, job_or_404(session, job_id, spec.kind), spec.what)
        return load(session, job_id)

    return router
