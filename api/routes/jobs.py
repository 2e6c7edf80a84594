"""The HTTP resource of every job kind, made from the registry (litehit.jobs.registry): submit
(202 + Location; 200 for a repeated Idempotency-Key), list (newest first, ``?state=``), get, cancel,
and the files a succeeded job published (its kind's artifacts). A kind states only its route, its
request and answer models and its artifacts; nothing here is written per kind."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.deps import ADMITTED, EnqueueDep, SessionDep, StorageDep
from api.errors import ApiError
from api.examples import EXAMPLES
from api.routes.common import BUSY, accepted, cancel_job, fast_json, job_or_404, paginate, submitted
from api.schemas import ErrorResponse, Page, create_model_of
from litehit.db.models import Job
from litehit.db.states import JobState
from litehit.jobs.base import Artifact, JobKind, TraceKind
from litehit.jobs.errors import IdempotencyConflict
from litehit.jobs.facts_kind import FactsKind
from litehit.jobs.registry import kinds
from litehit.jobs.submit import create_facts_job, create_trace_job
from litehit.jobs.views import JOBS, job_row, job_views, public_model
from litehit.storage import Storage

__all__ = ["routers"]

FILES: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}}


def _submit(
    kind: JobKind[Any], session: Session, storage: Storage, body: BaseModel, idempotency_key: str | None
) -> tuple[Job, bool]:
    if isinstance(kind, FactsKind):
        return create_facts_job(kind, session, storage, body, idempotency_key=idempotency_key)
    assert isinstance(kind, TraceKind)
    field = kind.options_field
    config = body.model_dump(exclude={"trace_id", field or ""}, exclude_unset=True, exclude_none=True)
    options = getattr(body, field).model_dump(mode="json") if field else {}
    trace_id = getattr(body, "trace_id", None)
    return create_trace_job(kind, session, storage, config, options, trace_id=trace_id, idempotency_key=idempotency_key)


def _summary(kind: JobKind[Any]) -> str:
    if isinstance(kind, FactsKind):
        return kind.submit_summary
    assert isinstance(kind, TraceKind)
    if kind.options_field:
        return f"Submit a {kind.what} (a replay config plus its options under `{kind.options_field}`)"
    return f"Submit a {kind.what} (the original offline config or the shorthand; trace by upload id or storage path)"


def _artifact_route(router: APIRouter, kind: JobKind[Any], artifact: Artifact) -> None:
    """GET /{job_id}/<artifact.path>: the published file, 409 until the job succeeded."""
    media = artifact.media_type
    types = [media] if isinstance(media, str) else list(media.values())

    def serve(session: Session, storage: Storage, job_id: str, params: dict[str, str]) -> FileResponse:
        job = job_or_404(session, job_id, kind.kind)
        if job.state != JobState.SUCCEEDED or not job.output_path:
            raise ApiError(409, "not_ready", f"the {kind.what} is {job.state}; {artifact.ready} only once it succeeded")
        path = storage.job_dir(job.id) / artifact.file.format(**params)
        if not path.is_file():
            raise ApiError(409, "conflict", f"{path.name} of this {kind.what} is not in storage (any more)")
        media_type = media if isinstance(media, str) else media[params["ext"]]
        name = artifact.download_name.format(id=job.id) if artifact.download_name else None
        return FileResponse(path, media_type=media_type, filename=name)

    responses: dict[int | str, dict[str, Any]] = {200: {"content": {t: {} for t in types}}, **FILES}
    route = router.get(
        f"/{{job_id}}/{artifact.path}",
        response_class=FileResponse,
        responses=responses,
        summary=artifact.summary,
        name=f"get_{kind.kind}_{artifact.path.split('.')[0].split('/')[0]}",
    )
    if not artifact.choices:

        def get_file(job_id: str, session: SessionDep, storage: StorageDep) -> FileResponse:
            return serve(session, storage, job_id, {})

        route(get_file)
        return
    name_choices = artifact.choices["name"]
    name_param = Path(pattern=f"^({'|'.join(name_choices)})$", description=f"one of {', '.join(name_choices)}")
    if "ext" not in artifact.choices:

        def get_named(job_id: str, session: SessionDep, storage: StorageDep, name: str = name_param) -> FileResponse:
            return serve(session, storage, job_id, {"name": name})

        route(get_named)
        return
    ext_choices = artifact.choices["ext"]

    def get_named_file(  # the Path defaults are evaluated here; annotations would be strings
        job_id: str,
        session: SessionDep,
        storage: StorageDep,
        name: str = name_param,
        ext: str = Path(pattern=f"^({'|'.join(ext_choices)})$", description=" or ".join(ext_choices)),
    ) -> FileResponse:
        return serve(session, storage, job_id, {"name": name, "ext": ext})

    route(get_named_file)


def job_router(kind: JobKind[Any]) -> APIRouter:
    router = APIRouter(prefix=kind.route, tags=[kind.route.strip("/")])
    public = public_model(kind)

    def load(session: Session, job_id: str) -> dict[str, Any]:
        row = job_row(session, job_id, kind.kind)
        if row is None:
            raise ApiError(404, "not_found", f"no {kind.kind} job with id {job_id}")
        return job_views(session, kind, [row])[0]

    def create(
        body: Any,
        response: Response,
        session: SessionDep,
        storage: StorageDep,
        enqueue: EnqueueDep,
        idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
    ) -> Response:
        try:
            job, created = _submit(kind, session, storage, body, idempotency_key)
        except IdempotencyConflict as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        accepted(session, enqueue, response, job, created, kind.first_task, f"/v1{kind.route}/{job.id}")
        return submitted(public, load(session, job.id), response)

    # the kind's own request model, with its examples
    create.__annotations__["body"] = Annotated[create_model_of(kind), Body(openapi_examples=EXAMPLES.get(kind.kind))]
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
        summary=_summary(kind),
        name=f"create_{kind.kind}",
    )(create)

    @router.get(
        "",
        response_model=Page[public],  # type: ignore[valid-type]
        summary=f"List {kind.what} jobs, newest first",
        name=f"list_{kind.kind}",
    )
    def list_jobs(
        session: SessionDep,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
        state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    ) -> dict[str, Any]:
        query = select(JOBS).where(JOBS.c.kind == kind.kind).order_by(JOBS.c.created_at.desc(), JOBS.c.id)
        if state:
            query = query.where(JOBS.c.state == state)
        items, total, next_offset = paginate(session, query, limit, offset, rows=True)
        views = job_views(session, kind, items)
        return {"items": views, "total": total, "limit": limit, "offset": offset, "next_offset": next_offset}

    @router.get(
        "/{job_id}",
        response_model=public,
        responses={404: {"model": ErrorResponse}},
        summary=f"One {kind.what} job: state, progress, outcome",
        name=f"get_{kind.kind}",
    )
    def get_job(job_id: str, session: SessionDep) -> Response:
        return fast_json(public, load(session, job_id))

    for artifact in kind.artifacts:
        _artifact_route(router, kind, artifact)

    @router.delete(
        "/{job_id}",
        response_model=public,
        responses=FILES,
        summary=f"Cancel a queued or running {kind.what}",
        name=f"cancel_{kind.kind}",
    )
    def cancel(job_id: str, session: SessionDep, storage: StorageDep) -> dict[str, Any]:
        cancel_job(session, storage, job_or_404(session, job_id, kind.kind), kind.what)
        return load(session, job_id)

    return router


def routers() -> list[APIRouter]:
    """One router per job kind, in the registry's order."""
    return [job_router(kind) for kind in kinds()]
