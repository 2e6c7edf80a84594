"""What the routes share: pagination, 404s, fast JSON views, cancelling and the answer to a
submitted job."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Response
from pydantic import BaseModel
from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.schemas import ErrorResponse
from litehit.db.models import Job, utcnow
from litehit.db.states import TERMINAL, JobState
from litehit.jobs.state import fail_job
from litehit.jobs.submit import Enqueue
from litehit.jobs.views import findable
from litehit.storage import Storage

log = logging.getLogger(__name__)

MAX_OFFSET = 2**63 - 1  # OFFSET is a bigint in SQL


def paginate(
    session: Session, query: Select[Any], limit: int, offset: int, *, rows: bool = False
) -> tuple[list[Any], int, int | None]:
    """A page of ORM objects (or, with rows, of Core rows as dicts), the total and the next offset."""
    if offset > MAX_OFFSET:
        raise ApiError(
            422,
            "validation_error",
            f"query.offset: must be at most {MAX_OFFSET}",
            details=[{"loc": ["query", "offset"], "msg": f"must be at most {MAX_OFFSET}", "input": offset}],
        )
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    page = query.limit(limit).offset(offset)
    items = [dict(r) for r in session.execute(page).mappings()] if rows else list(session.scalars(page))
    next_offset = offset + len(items) if offset + len(items) < total else None
    return items, int(total), next_offset


def job_or_404(session: Session, job_id: str, kind: str) -> Job:
    job = session.get(Job, job_id) if findable(job_id) else None
    if job is None or job.kind != kind:
        raise ApiError(404, "not_found", f"no {kind} job with id {job_id}")
    return job


def fast_json(model: type[BaseModel], data: dict[str, Any]) -> Response:
    """Validates and serializes with pydantic-core in one step: status polling is the hot path
    and FastAPI's generic encoder costs more than the database round trips."""
    return Response(model.model_validate(data).model_dump_json(), media_type="application/json")


def cancel_job(session: Session, storage: Storage, job: Job, what: str) -> None:
    """Asks a queued or running job to stop (409 once it ended); a queued one ends at once."""
    if job.state in TERMINAL:
        raise ApiError(409, "conflict", f"the {what} already ended ({job.state})")
    session.execute(update(Job).where(Job.id == job.id).values(cancel_requested=True))
    session.commit()
    if job.state == JobState.QUEUED and fail_job(
        session, job.id, "cancelled before it started", state=JobState.CANCELLED
    ):
        storage.remove_work(job.id)


BUSY: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorResponse, "description": "too many submissions at once, or no database: see Retry-After"}
}
"""The extra answer of a submission route (see api.deps.Admission)."""


def submitted(model: type[BaseModel], data: dict[str, Any], response: Response) -> Response:
    """The answer to a submission, serialized on the request's own thread (as fast_json): a
    submission never waits for a second thread while it holds its admission slot."""
    out = fast_json(model, data)
    out.status_code = response.status_code or 202
    out.headers["Location"] = response.headers["Location"]
    return out


def accepted(
    session: Session, enqueue: Enqueue, response: Response, job: Job, created: bool, task: str, location: str
) -> None:
    """202 and enqueue for a new job, 200 for the one an Idempotency-Key names; Location either way."""
    if created:
        _enqueue(session, enqueue, job, task)
    else:
        response.status_code = 200
    response.headers["Location"] = location


def _enqueue(session: Session, enqueue: Enqueue, job: Job, task: str) -> None:
    """Commit the row (done by the caller), then enqueue. A broker outage leaves the job queued:
    the sweep enqueues it again once the broker is back."""
    try:
        enqueue(task, job.id)
    except Exception as exc:
        log.warning("could not enqueue job %s yet: %s", job.id, exc)
        return
    session.execute(update(Job).where(Job.id == job.id).values(heartbeat_at=utcnow()))
    session.commit()
