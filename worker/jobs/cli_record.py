"""Job records of CLI runs, in the same database as the service (the embedded SQLite by
default), so ``litehit jobs`` lists past runs. Recording never breaks a command: if the
database is unusable, the command warns once and carries on."""

from __future__ import annotations

import sys
from typing import Any

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.orm import Session

from worker.db.migrate import alembic_config, upgrade
from worker.db.models import Job, LaneRun, utcnow
from worker.db.session import get_engine, session_scope
from worker.jobs.query_job import record_summaries
from worker.query import QueryResult
from worker.replay.runner import ReplayResult
from worker.settings import Settings, get_settings

__all__ = ["JobRecorder", "ensure_schema"]


def ensure_schema(url: str) -> None:
    """Migrates an embedded SQLite database to head; other databases are migrated by their
    stack (alembic upgrade head) and only checked."""
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    with get_engine(url).connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current == head:
        return
    if not url.startswith("sqlite"):
        raise RuntimeError(f"the database is at revision {current}, not {head}: run `alembic upgrade head`")
    upgrade(url)


class JobRecorder:
    """**Usage**::

    with JobRecorder("replay", spec_dict) as rec:
        result = run_replay(spec)
        rec.replay_succeeded(result)       # or rec.query_succeeded(result, path)
    # an exception inside the block records the job as failed (and is re-raised)
    """

    def __init__(self, kind: str, spec: dict[str, Any], settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.kind, self.spec = kind, spec
        self.job_id: str | None = None

    def _warn(self, exc: BaseException) -> None:
        print(f"litehit: warning: not recording this run in {self.settings.db_url}: {exc}", file=sys.stderr)
        self.job_id = None

    def __enter__(self) -> JobRecorder:
        if not self.settings.record_jobs:
            return self
        try:
            ensure_schema(self.settings.db_url)
            with session_scope(self.settings.db_url) as session:
                job = Job(kind=self.kind, source="cli", spec=self.spec, state="running", stage=self.kind,
                          started_at=utcnow(), stats={}, progress={})  # fmt: skip
                session.add(job)
                session.flush()
                self.job_id = job.id
        except Exception as exc:
            self._warn(exc)
        return self

    def _update(self, fn: Any) -> None:
        if self.job_id is None:
            return
        try:
            with session_scope(self.settings.db_url) as session:
                job = session.get(Job, self.job_id)
                if job is not None:
                    fn(session, job)
        except Exception as exc:
            self._warn(exc)

    def replay_succeeded(self, result: ReplayResult) -> None:
        def done(session: Session, job: Job) -> None:
            job.state, job.stage, job.finished_at = "succeeded", "done", utcnow()
            job.output_path = str(result.facts_path.resolve())
            job.stats = {"trace_format": result.trace_format.value, "lines": result.lines, "reads": result.reads,
                         "blocks": result.blocks, "facts_rows": result.facts_rows,
                         "seconds": round(result.elapsed_s, 3)}  # fmt: skip
            for i, lane in enumerate(result.lanes):
                session.add(LaneRun(job_id=job.id, lane=i, instance_id=lane.instance_id, state="succeeded",
                                    requests=lane.requests, requests_total=lane.requests, blocks=lane.blocks,
                                    blocks_total=lane.blocks, unique_blocks=lane.unique_blocks,
                                    memory_bytes=lane.memory_bytes, expired_blocks=lane.expired_blocks,
                                    finished_at=utcnow()))  # fmt: skip

        self._update(done)

    def query_succeeded(self, result: QueryResult, output: str | None) -> None:
        def done(session: Session, job: Job) -> None:
            job.state, job.stage, job.finished_at = "succeeded", "done", utcnow()
            job.output_path = output
            job.stats = {"rows": result.rows, "instances": len(result.instances)}
            record_summaries(session, job.id, result)

        self._update(done)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            return

        def failed(_: Session, job: Job) -> None:
            cancelled = isinstance(exc, KeyboardInterrupt)
            job.state = "cancelled" if cancelled else "failed"
            job.error = "interrupted" if cancelled else str(exc)
            job.stage, job.finished_at = "done", utcnow()

        self._update(failed)
