"""The report page of a query job: the same self-contained HTML page as ``litehit report``,
built from the query's facts, capacities and targets, with its replay's config and trace."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from api.deps import SessionDep, StorageDep
from api.errors import ApiError
from api.routes.common import job_or_404
from api.schemas import ErrorResponse
from litehit.capacity import parse_capacities
from litehit.db.models import Job, Trace
from litehit.db.states import JobState
from litehit.errors import QueryError
from litehit.report import ReplayRecord, build_report, describe_facts_file, package_version
from worker.jobs.query_job import facts_of

__all__ = ["router"]

router = APIRouter(prefix="/queries", tags=["queries"])


@router.get(
    "/{job_id}/report.html",
    response_class=HTMLResponse,
    responses={
        200: {"content": {"text/html": {}}},
        404: {"model": ErrorResponse},
        409: {"model": ErrorResponse},
    },
    summary="One self-contained HTML page: curves, table, targets, miss attribution, provenance",
)
def get_report(job_id: str, session: SessionDep, storage: StorageDep) -> HTMLResponse:
    job = job_or_404(session, job_id, "query")
    if job.state != JobState.SUCCEEDED:
        raise ApiError(409, "not_ready", f"the query is {job.state}; its report exists only once it succeeded")
    try:
        facts = facts_of(session, storage, job)
    except QueryError as exc:
        raise ApiError(409, "not_ready", str(exc)) from None
    if not facts.is_file():
        raise ApiError(409, "conflict", "the facts of this query are no longer in storage")
    parent = session.get(Job, job.parent_id) if job.parent_id else None
    page = build_report(
        facts,
        facts_file=describe_facts_file(facts, storage.relative(facts)),
        version=package_version(),
        generated_at=datetime.now(UTC),
        capacities=parse_capacities([str(c) for c in job.spec["capacity_gb"]]),
        plateau_fractions=job.spec["targets"],
        replay=_replay_record(session, parent) if parent is not None else None,
        context={"query job": job.id},
    )
    return HTMLResponse(page, media_type="text/html; charset=utf-8")


def _replay_record(session: Any, replay: Job) -> ReplayRecord:
    trace_row = session.get(Trace, replay.trace_id) if replay.trace_id else None
    config = dict(replay.spec)
    trace: dict[str, Any] = {"path": config.get("trace_file_path", "")}
    if trace_row is not None:
        trace = {
            "id": trace_row.id,
            "name": trace_row.name,
            "format": trace_row.trace_format,
            "size": f"{trace_row.size_bytes:,} bytes",
            "compression": trace_row.compression,
            "sha256": trace_row.sha256,
        }
    stats = {k: v for k, v in (replay.stats or {}).items() if isinstance(v, int | float | str)}
    return ReplayRecord(replay.id, config, trace, stats, replay.finished_at)
