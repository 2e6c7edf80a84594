"""Helpers shared by the routes: pagination and 404s."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from api.errors import ApiError
from worker.db.models import Job

T = TypeVar("T")


def paginate(session: Session, query: Select[Any], limit: int, offset: int) -> tuple[list[Any], int, int | None]:
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    items = list(session.scalars(query.limit(limit).offset(offset)))
    next_offset = offset + len(items) if offset + len(items) < total else None
    return items, int(total), next_offset


def job_or_404(session: Session, job_id: str, kind: str) -> Job:
    job = session.get(Job, job_id)
    if job is None or job.kind != kind:
        raise ApiError(404, "not_found", f"no {kind} job with id {job_id}")
    return job
