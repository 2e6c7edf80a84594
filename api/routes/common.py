"""What the routes share: pagination, 404s, fast JSON views and the answer to a submitted job."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Response
from fastapi.responses import FileResponse
from pydantic import BaseModel
from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.schemas import ErrorResponse
from litehit.db.models import Job, LaneRun, ProfileLane, ProfileRow, QuerySummary, SweepRun, WindowLane, utcnow
from litehit.db.states import TERMINAL, JobState
from litehit.storage import Storage
from worker.jobs.state import fail_job
from worker.jobs.submit import Enqueue

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


def findable(identifier: str) -> bool:
    """Whether an id from a URL can name a row at all: no id holds a NUL byte (and PostgreSQL
    refuses to compare with one)."""
    return "\x00" not in identifier


def job_or_404(session: Session, job_id: str, kind: str) -> Job:
    job = session.get(Job, job_id) if findable(job_id) else None
    if job is None or job.kind != kind:
        raise ApiError(404, "not_found", f"no {kind} job with id {job_id}")
    return job


def fast_json(model: type[BaseModel], data: dict[str, Any]) -> Response:
    """Validates and serializes with pydantic-core in one step: status polling is the hot path
    and FastAPI's generic encoder costs more than the database round trips."""
    return Response(model.model_validate(data).model_dump_json(), media_type="application/json")


# Reads for the views use Core rows, not ORM objects: status polling is the hot path.
JOBS, LANES, SUMMARIES, RUNS = Job.__table__, LaneRun.__table__, QuerySummary.__table__, SweepRun.__table__
WINDOW_LANES = WindowLane.__table__
PROFILE_LANES, PROFILE_ROWS = ProfileLane.__table__, ProfileRow.__table__


def job_row(session: Session, job_id: str, kind: str) -> dict[str, Any]:
    row = session.execute(select(JOBS).where(JOBS.c.id == job_id)).mappings().first() if findable(job_id) else None
    if row is None or row["kind"] != kind:
        raise ApiError(404, "not_found", f"no {kind} job with id {job_id}")
    return dict(row)


def _part_rows(session: Session, table: Any, key: str, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The rows of the jobs' parallel stage, by job, each job's in `key` order."""
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in job_ids}
    query = select(table).where(table.c.job_id.in_(job_ids)).order_by(table.c.job_id, table.c[key])
    for row in session.execute(query).mappings():
        out[row["job_id"]].append(dict(row))
    return out


def lane_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    return _part_rows(session, LANES, "lane", job_ids)


def run_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    return _part_rows(session, RUNS, "run", job_ids)


def window_lane_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    return _part_rows(session, WINDOW_LANES, "lane", job_ids)


def profile_lane_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    return _part_rows(session, PROFILE_LANES, "lane", job_ids)


def profile_summary_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in job_ids}
    t = PROFILE_ROWS
    query = select(t).where(t.c.job_id.in_(job_ids)).order_by(t.c.job_id, t.c.lane, t.c.row)
    for row in session.execute(query).mappings():
        out[row["job_id"]].append(dict(row))
    return out


def job_file(session: Session, storage: Storage, job_id: str, kind: str, name: str, media: str) -> FileResponse:
    """A file a succeeded job published next to its output (409 before it succeeded)."""
    job = job_or_404(session, job_id, kind)
    if job.state != JobState.SUCCEEDED or not job.output_path:
        raise ApiError(409, "not_ready", f"the job is {job.state}; results exist only once it succeeded")
    return FileResponse(storage.absolute(job.output_path).parent / name, media_type=media)


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


def summary_rows(session: Session, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in job_ids}
    query = (
        select(SUMMARIES)
        .where(SUMMARIES.c.job_id.in_(job_ids))
        .order_by(SUMMARIES.c.job_id, SUMMARIES.c.is_total, SUMMARIES.c.instance_id, SUMMARIES.c.slot)
    )
    for row in session.execute(query).mappings():
        out[row["job_id"]].append(dict(row))
    return out


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
