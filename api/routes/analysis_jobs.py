"""The routes every analysis job over a replay config shares (policy sweeps, window sizings,
workload profiles): submit (a replay config plus the analysis's options under one field, if it has
options), list, get with its part rows from SQL, its published files (result JSON and its plot, or
its named plots as PNG and SVG), cancel. Each resource states only what differs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.deps import ADMITTED, EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.examples import Examples
from api.routes.common import (
    BUSY,
    JOBS,
    accepted,
    cancel_job,
    fast_json,
    job_file,
    job_or_404,
    job_row,
    paginate,
    submitted,
)
from api.schemas import ErrorResponse, Page
from litehit.db.states import JobState
from worker.errors import IdempotencyConflict

__all__ = ["AnalysisJob", "analysis_job_router"]

CreateJob = Callable[..., tuple[Any, bool]]  # (session, storage, config, options, *, trace_id, idempotency_key)
Rows = Callable[[Session, list[str]], dict[str, list[dict[str, Any]]]]  # job ids -> rows by job
PLOT_MEDIA = {"png": "image/png", "svg": "image/svg+xml"}


@dataclass(frozen=True)
class AnalysisJob:
    prefix: str  # "/policy-sweeps"
    what: str  # "policy sweep", for summaries and messages
    kind: str  # Job.kind
    options_field: str | None  # the body field holding the analysis's options ("sweep", "window"), if any
    parts_field: str  # the view field of the part rows ("runs", "lanes")
    create_model: type[BaseModel]
    public_model: type[BaseModel]
    create: CreateJob
    first_task: str
    part_rows: Rows
    result_route: str  # the result JSON is served at /{id}/<result_route>
    result_file: str  # ... from this published file
    plot_file: str  # the published plot, served at /{id}/plot.png; with plot_names, the plots' folder
    result_summary: str
    plot_summary: str
    plot_names: tuple[str, ...] = ()  # named plots, served at /{id}/plots/<name>.png|svg
    summary_rows: Rows | None = None  # more rows from SQL, shown in the view's "summary"
    examples: Examples | None = None  # request bodies shown in the docs (api/examples.py)


def analysis_job_router(spec: AnalysisJob) -> APIRouter:
    router = APIRouter(prefix=spec.prefix, tags=[spec.prefix.strip("/")])
    public = spec.public_model

    def links(job: dict[str, Any]) -> dict[str, str]:
        if job["state"] != JobState.SUCCEEDED:
            return {}
        base = f"/v1{spec.prefix}/{job['id']}"
        plots = {name: f"{base}/plots/{name}.png" for name in spec.plot_names} or {"plot": f"{base}/plot.png"}
        return {"result": f"{base}/{spec.result_route}", **plots}

    def views(session: Session, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids = [j["id"] for j in jobs]
        parts = spec.part_rows(session, ids)
        summaries = spec.summary_rows(session, ids) if spec.summary_rows else None
        out = []
        for job in jobs:
            view = {**job, spec.parts_field: parts[job["id"]], "links": links(job)}
            if summaries is not None:
                view["summary"] = summaries[job["id"]]
            out.append(view)
        return out

    def load(session: Session, job_id: str) -> dict[str, Any]:
        return views(session, [job_row(session, job_id, spec.kind)])[0]

    def create(
        body: Any,
        response: Response,
        session: SessionDep,
        storage: StorageDep,
        enqueue: EnqueueDep,
        idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
    ) -> Response:
        field = spec.options_field
        config = body.model_dump(exclude={"trace_id", field or ""}, exclude_unset=True, exclude_none=True)
        options = getattr(body, field).model_dump(mode="json") if field else {}
        try:
            job, created = spec.create(
                session, storage, config, options, trace_id=body.trace_id, idempotency_key=idempotency_key
            )
        except IdempotencyConflict as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        accepted(session, enqueue, response, job, created, spec.first_task, f"/v1{spec.prefix}/{job.id}")
        return submitted(public, load(session, job.id), response)

    # the resource's own request model, with its examples
    create.__annotations__["body"] = Annotated[spec.create_model, Body(openapi_examples=spec.examples)]
    router.post(
        "",
        status_code=202,
        response_model=public,
        responses={
            200: {"model": public, "description": "an existing job (same Idempotency-Key)"},
            409: {"model": ErrorResponse},
            422: {"model": ErrorResponse},
            **BUSY,
        },
        dependencies=[ADMITTED],
        summary=f"Submit a {spec.what} (a replay config"
        + (f" plus its options under `{spec.options_field}`)" if spec.options_field else ")"),
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
        return {
            "items": views(session, items),
            "total": total,
            "limit": limit,
            "offset": offset,
            "next_offset": next_offset,
        }

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

    if spec.plot_names:
        names = "|".join(spec.plot_names)

        @router.get(
            "/{job_id}/plots/{name}.{ext}",
            response_class=FileResponse,
            responses={200: {"content": {media: {} for media in PLOT_MEDIA.values()}}, **files},
            summary=spec.plot_summary,
        )
        def get_named_plot(  # the Path defaults are evaluated here; annotations would be strings
            job_id: str,
            session: SessionDep,
            storage: StorageDep,
            name: str = Path(pattern=f"^({names})$", description=f"one of {', '.join(spec.plot_names)}"),
            ext: str = Path(pattern="^(png|svg)$", description="png or svg"),
        ) -> FileResponse:
            return job_file(session, storage, job_id, spec.kind, f"{spec.plot_file}/{name}.{ext}", PLOT_MEDIA[ext])

    else:

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
