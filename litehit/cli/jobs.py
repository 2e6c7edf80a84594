"""``litehit jobs``: past runs recorded in the database (CLI runs and service jobs alike), of
every kind (litehit.jobs.kinds)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from litehit.cli.commands import COMMAND_HELP
from litehit.jobs.kinds import Kind

__all__ = ["add_parser"]

KINDS = [k.value for k in Kind]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "jobs",
        help=COMMAND_HELP["jobs"],
        description=f"  litehit jobs [--limit 20] [--kind {'|'.join(KINDS)}] [--show JOB_ID]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--kind", choices=KINDS)
    p.add_argument("--show", metavar="JOB_ID", help="print one job in full (JSON): its row, its parts, its summaries")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from sqlalchemy import select

    from litehit.db.models import Job
    from litehit.db.session import session_scope
    from litehit.jobs.records import ensure_schema, wait_for_records
    from litehit.settings import get_settings

    settings = get_settings()
    wait_for_records()  # runs that ended before this one may still be writing their rows
    ensure_schema(settings.db_url)
    with session_scope(settings.db_url) as session:
        if args.show:
            return _show(session, args.show)
        query = select(Job).order_by(Job.created_at.desc()).limit(args.limit)
        if args.kind:
            query = query.where(Job.kind == args.kind)
        jobs = list(session.scalars(query))
    print(f"{'id':32}  {'kind':12}  {'source':6}  {'state':9}  {'created (UTC)':19}  {'secs':>7}  output / error")
    for job in jobs:
        secs = (
            f"{(job.finished_at - job.started_at).total_seconds():7.2f}"
            if job.finished_at and job.started_at
            else "      -"
        )
        tail = job.error if job.error else (job.output_path or "")
        print(
            f"{job.id:32}  {job.kind:12}  {job.source:6}  {job.state:9}  {job.created_at:%Y-%m-%d %H:%M:%S}  {secs}  {tail}"
        )
    if not jobs:
        print("(no jobs yet)")
    return 0


def _show(session: Any, job_id: str) -> int:
    """One job as JSON: its row, its parts as the API shows them (under its kind's name for
    them: lanes, runs) and its summary rows."""
    from litehit.jobs.base import TraceKind
    from litehit.jobs.registry import job_kind
    from litehit.jobs.views import job_row, part_views, summary_views

    row = job_row(session, job_id)
    if row is None:
        print(f"no job {job_id}")
        return 1
    data: dict[str, Any] = dict(row)
    try:
        kind = job_kind(row["kind"])
    except ValueError:  # a kind of another version: its row alone
        kind = None
    if kind is not None:
        if isinstance(kind, TraceKind):
            data[kind.parts_field] = part_views(session, kind, [job_id])[job_id]
        data["summaries"] = summary_views(session, kind, [job_id])[job_id]
    print(json.dumps(data, indent=2, default=str))
    return 0
