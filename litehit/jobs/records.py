"""Job records of CLI runs, in the same database as the service (the embedded SQLite by
default), so ``litehit jobs`` lists past runs of every kind.

A run is recorded as the service records a job of its kind: the job row, one succeeded part row
per part (its plan and result) and the kind's summary rows, all from the same part outputs and
merge the service uses. The rows are written once, when the run ends (a killed command leaves no
stale "running" row); opening and migrating the database happens in a background thread while
the run works. Recording never breaks a command: if the database is unusable, the command warns
and carries on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from litehit.db.migrate import SCHEMA_HEAD
from litehit.db.states import JobState, LaneState, Stage
from litehit.jobs.kinds import Kind
from litehit.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from litehit.jobs.local import LocalRun
    from litehit.query import QueryResult

__all__ = ["JobRecorder", "ensure_schema"]


def ensure_schema(url: str) -> None:
    """Migrates an embedded SQLite database to head; other databases are migrated by their
    stack (`litehit migrate`) and only checked."""
    from litehit.db.migrate import current_revision

    current = current_revision(url)
    if current == SCHEMA_HEAD:
        return
    if not url.startswith("sqlite"):
        raise RuntimeError(f"the database is at revision {current}, not {SCHEMA_HEAD}: run `litehit migrate`")
    from litehit.db.migrate import upgrade  # Alembic is imported only when a migration runs

    upgrade(url)
    reached = current_revision(url)
    if reached != SCHEMA_HEAD:  # e.g. an install without its migrations
        raise RuntimeError(f"migrating the database ended at revision {reached}, not {SCHEMA_HEAD}")


class JobRecorder:
    """**Usage**::

    with JobRecorder(Kind.POLICY_SWEEP, stored_spec) as rec:
        run = run_local(kind, spec, runtime)
        rec.succeeded(run, output_path)      # or rec.query_succeeded(result, output_path)
    rec.job_id                               # the recorded job (None if not recorded)
    # an exception inside the block records the job as failed (and is re-raised)
    """

    def __init__(
        self,
        kind: Kind,
        spec: dict[str, Any],
        settings: Settings | None = None,
        *,
        rename: Callable[[Any], Any] | None = None,
    ) -> None:
        """rename(value) is what the record shows of its spec and error text (the CLI names a
        spooled standard input ``-`` again: litehit.cli.stdin_input.named_stdin)."""
        self.settings = settings or get_settings()
        self.rename = rename or (lambda value: value)
        self.kind, self.spec = Kind(kind), spec
        self.job_id: str | None = None
        self._ready: threading.Thread | None = None
        self._problem: BaseException | None = None
        self._outcome: tuple[str, Any, str | None] | None = None
        self._started: datetime | None = None

    def _prepare(self) -> None:
        try:
            ensure_schema(self.settings.db_url)
        except BaseException as exc:
            self._problem = exc

    def __enter__(self) -> JobRecorder:
        if self.settings.record_jobs:
            from litehit.db.models import utcnow

            self._started = utcnow()
            self._ready = threading.Thread(target=self._prepare, name="litehit-record", daemon=True)
            self._ready.start()
        return self

    def succeeded(self, run: LocalRun, output: str | None) -> None:
        """A run of a kind over a trace ended; output: its main file (None: not written)."""
        self._outcome = ("trace", run, output)

    def query_succeeded(self, result: QueryResult, output: str | None) -> None:
        self._outcome = ("query", result, output)

    def document_succeeded(self, document: dict[str, Any], output: str | None) -> None:
        """A run of a kind over facts whose result is a document (litehit.jobs.facts_kind)."""
        self._outcome = ("document", document, output)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._ready is None:
            return
        self._ready.join()
        if self._problem is None:
            try:
                self._write(exc)
            except Exception as problem:
                self._problem = problem
        if self._problem is not None:
            print(
                f"litehit: warning: not recording this run in {self.settings.db_url}: {self._problem}", file=sys.stderr
            )
            self.job_id = None

    def _write(self, exc: BaseException | None) -> None:
        from litehit.db.models import Job, utcnow
        from litehit.db.session import session_scope

        with session_scope(self.settings.db_url) as session:
            job = Job(
                kind=self.kind,
                source="cli",
                spec=self.rename(self.spec),
                stage=Stage.DONE,
                started_at=self._started,
                finished_at=utcnow(),
                stats={},
                progress={},
            )
            session.add(job)
            session.flush()
            if exc is not None:
                cancelled = isinstance(exc, KeyboardInterrupt)
                job.state = JobState.CANCELLED if cancelled else JobState.FAILED
                job.error = "interrupted" if cancelled else self.rename(str(exc))
            elif self._outcome is None:
                job.state = JobState.FAILED
                job.error = "ended without a result"
            else:
                shape, value, output = self._outcome
                job.state, job.output_path = JobState.SUCCEEDED, output
                if shape == "trace":
                    self._trace_done(session, job, value)
                elif shape == "document":
                    self._document_done(session, job, value)
                else:
                    self._query_done(session, job, value)
            self.job_id = job.id

    def _trace_done(self, session: Session, job: Any, run: LocalRun) -> None:
        from litehit.db.models import JobPart
        from litehit.jobs.base import TraceKind
        from litehit.jobs.registry import job_kind

        kind = job_kind(self.kind)
        assert isinstance(kind, TraceKind)
        c = run.counts
        parse = {"trace_format": c.trace_format, "lines": c.lines, "rows": c.rows, "reads": c.reads, "blocks": c.blocks}
        job.stats = {**parse, **run.merged.stats, "seconds": round(c.seconds, 3)}
        for i, (part, output) in enumerate(zip(run.parts, run.outputs, strict=True)):
            session.add(
                JobPart(
                    job_id=job.id,
                    part=i,
                    label=kind.part_label(part),
                    state=LaneState.SUCCEEDED,
                    attempts=1,
                    plan=part.model_dump(mode="json"),
                    progress={"requests": part.requests_total, "blocks": part.blocks_total},
                    result=output.result.model_dump(mode="json"),
                    finished_at=job.finished_at,
                )
            )
        spec = kind.spec_model.model_validate(self.spec)
        session.add_all(kind.summary_rows(job.id, run.merged.value, spec))

    def _query_done(self, session: Session, job: Any, result: QueryResult) -> None:
        from litehit.jobs.query import KIND as QUERY

        job.stats = {"rows": result.rows, "instances": len(result.instances)}
        session.add_all(QUERY.cli_summary_rows(job.id, result))

    def _document_done(self, session: Session, job: Any, document: dict[str, Any]) -> None:
        from litehit.jobs.facts_kind import DocumentKind
        from litehit.jobs.registry import job_kind

        kind = job_kind(self.kind)
        assert isinstance(kind, DocumentKind)
        job.stats = kind.stats_of(document)
        session.add_all(kind.summary_rows(job.id, document, kind.spec_model.model_validate(self.spec)))
