"""What a job shows of itself (the API's answers, ``litehit jobs --show``): its row, its parts'
views and its summary rows, read from SQL as Core rows (status polling is the hot path), and the
public model of each kind, made from the kind's declarations.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, computed_field, create_model
from sqlalchemy import select
from sqlalchemy.orm import Session

from litehit.db.models import Job, JobPart
from litehit.db.states import JobState, Stage
from litehit.jobs.base import JobKind, TraceKind, UTCDateTime
from litehit.jobs.kinds import Kind
from litehit.kv_models import assumed_kv_note

__all__ = ["JOBS", "JobPublic", "findable", "job_row", "job_views", "part_views", "public_model", "summary_views"]

JOBS = Job.__table__
PARTS = JobPart.__table__


class JobPublic(BaseModel):
    id: str = Field(description="the job's id (the {job_id} of its URLs)")
    kind: Kind = Field(description=", ".join(k.value for k in Kind))
    state: JobState = Field(description="queued -> running -> succeeded | failed | cancelled")
    stage: Stage = Field(
        description="the step the job is at: "
        + ", ".join(s.value for s in Stage if s not in (Stage.QUEUED, Stage.DONE))
        + "; done once it ended"
    )
    source: str = Field(description="who submitted it: api or cli")
    created_at: UTCDateTime = Field(description="when it was submitted (UTC)")
    started_at: UTCDateTime | None = Field(description="when a worker first took it (UTC)")
    finished_at: UTCDateTime | None = Field(description="when it ended (UTC)")
    error: str | None = Field(description="why it failed or was cancelled")
    attempts: int = Field(description="times a worker took the current stage (more than 1 after a lost worker)")
    cancel_requested: bool = Field(description="a cancel was asked (DELETE); running parts stop at their next check")
    progress: dict[str, Any] = Field(description="counters of the work done so far")
    stats: dict[str, Any] = Field(description="what the finished stages measured (rows, requests, blocks, ...)")
    spec: dict[str, Any] = Field(
        description="the request as validated and stored (the trace resolved inside the storage root)"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="one line when the job's replay assumed the default KV bytes (2 KiB per token: a shorthand "
        "without model, kv_bytes_per_token or block_bytes), else null"
    )
    @property
    def note(self) -> str | None:
        return assumed_kv_note(self.spec)


@functools.cache
def public_model(kind: JobKind[Any]) -> type[BaseModel]:
    """The public model of a job of `kind`: JobPublic plus what the kind shows."""
    model: type[BaseModel] = create_model(kind.public_name, __base__=JobPublic, **kind.public_fields())
    return model


def findable(identifier: str) -> bool:
    """Whether an id from a URL can name a row at all: no id holds a NUL byte (and PostgreSQL
    refuses to compare with one)."""
    return "\x00" not in identifier


def job_row(session: Session, job_id: str, kind: Kind | None = None) -> dict[str, Any] | None:
    """The job's row as a dict (None: no such job, or not of `kind`)."""
    if not findable(job_id):
        return None
    row = session.execute(select(JOBS).where(JOBS.c.id == job_id)).mappings().first()
    if row is None or (kind is not None and row["kind"] != kind):
        return None
    return dict(row)


def part_views(session: Session, kind: JobKind[Any], job_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in job_ids}
    if not isinstance(kind, TraceKind) or not job_ids:
        return out
    query = select(PARTS).where(PARTS.c.job_id.in_(job_ids)).order_by(PARTS.c.job_id, PARTS.c.part)
    for row in session.execute(query).mappings():
        view = kind.part_view(row["plan"] or {}, row["progress"] or {}, row["result"])
        claims = {k: row[k] for k in ("state", "attempts", "worker", "error", "started_at", "finished_at")}
        out[row["job_id"]].append({**view, **claims})
    return out


def summary_views(session: Session, kind: JobKind[Any], job_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in job_ids}
    table = kind.summary_table.__table__ if kind.summary_table is not None else None
    if table is None or not job_ids:
        return out
    order = [table.c.job_id, *(table.c[name] for name in kind.summary_order())]
    for row in session.execute(select(table).where(table.c.job_id.in_(job_ids)).order_by(*order)).mappings():
        out[row["job_id"]].append(dict(row))
    return out


def job_views(session: Session, kind: JobKind[Any], jobs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The public views of job rows of one kind (two more queries in all, whatever their number)."""
    ids = [j["id"] for j in jobs]
    parts, summaries = part_views(session, kind, ids), summary_views(session, kind, ids)
    return [kind.view(job, parts[job["id"]], summaries[job["id"]]) for job in jobs]
