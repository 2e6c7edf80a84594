"""``litehit jobs``: past runs recorded in the database (CLI runs and service jobs alike)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "jobs",
        help="list past jobs: replays, queries, policy sweeps, window sizings (the embedded database, or LITEHIT_DATABASE_URL)",
        description="  litehit jobs [--limit 20] [--kind replay|query|policy_sweep|window] [--show JOB_ID]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--kind", choices=["replay", "query", "policy_sweep", "window"])
    p.add_argument("--show", metavar="JOB_ID", help="print one job in full (JSON)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from sqlalchemy import select

    from litehit.cli.run_record import ensure_schema
    from litehit.db.models import Job
    from litehit.db.session import session_scope
    from litehit.settings import get_settings

    settings = get_settings()
    ensure_schema(settings.db_url)
    with session_scope(settings.db_url) as session:
        if args.show:
            job = session.get(Job, args.show)
            if job is None:
                print(f"no job {args.show}")
                return 1
            data = {c.name: getattr(job, c.name) for c in Job.__table__.columns}
            data["lanes"] = [{c.name: getattr(r, c.name) for c in r.__table__.columns} for r in job.lanes]
            data["summaries"] = [{c.name: getattr(r, c.name) for c in r.__table__.columns} for r in job.summaries]
            data["runs"] = [{c.name: getattr(r, c.name) for c in r.__table__.columns} for r in job.runs]
            data["window_lanes"] = [{c.name: getattr(r, c.name) for c in r.__table__.columns} for r in job.window_lanes]
            print(json.dumps(data, indent=2, default=str))
            return 0
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
