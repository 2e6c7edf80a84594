"""Job records of CLI runs, in the same database as the service (the embedded SQLite by
default), so ``litehit jobs`` lists past runs of every kind.

A run is recorded as the service records a job of its kind: the job row, one succeeded part row
per part (its plan and result) and the kind's summary rows, all from the same part outputs and
merge the service uses. The rows are written once, when the run ends (a killed command leaves no
stale "running" row), after the command's answer is out: the `litehit` command records in a
forked child, so neither the settings, SQLAlchemy's import nor the migration check delays its
answer or its exit (the child reads the settings; with LITEHIT_RECORD_JOBS=0 it records nothing).
The child holds a shared lock on the user's records lock (in the temporary directory, so that it
is known before the settings are read) until its rows are committed; readers (``litehit jobs``)
take it exclusively first, so they see every run that ended before them. Recording never breaks
a command: if the database is unusable, the command (or its recording child) warns and carries on.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.db.migrate import SCHEMA_HEAD
from litehit.db.states import JobState, LaneState, Stage
from litehit.jobs.kinds import Kind

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from litehit.jobs.local import LocalRun
    from litehit.query import QueryResult
    from litehit.settings import Settings

__all__ = ["JobRecorder", "ensure_schema", "wait_for_records"]

RECORDS_LOCK = "litehit-records-{uid}.lock"
"""In the temporary directory, one per user: held shared by every recording child until its
rows are committed (a reader may so wait for another home's recording too; never for long)."""
WAIT_MAX_S = 30.0
"""How long a reader waits for recordings still being written before it reads anyway."""


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

    with _migrating(url):  # commands started together on a new home: one migrates, the rest wait
        if current_revision(url) != SCHEMA_HEAD:
            upgrade(url)
    reached = current_revision(url)
    if reached != SCHEMA_HEAD:  # e.g. an install without its migrations
        raise RuntimeError(f"migrating the database ended at revision {reached}, not {SCHEMA_HEAD}")


@contextlib.contextmanager
def _migrating(url: str) -> Iterator[None]:
    """Holds an exclusive lock beside an SQLite database file while it is migrated, so two
    processes never create the same tables (the second failed with 'table ... already exists')."""
    from litehit.db.session import ensure_sqlite_dir

    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ""
    try:
        import fcntl
    except ImportError:  # no POSIX locks: migrate unguarded
        fcntl = None  # type: ignore[assignment]
    if not path or fcntl is None:  # an in-memory database is this process's own
        yield
        return
    ensure_sqlite_dir(url)
    lock = os.open(path + ".migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # (closing releases the lock)


def _lock_path() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / RECORDS_LOCK.format(uid=uid)


def wait_for_records() -> None:
    """Waits (at most WAIT_MAX_S) until the recordings of runs that already ended are committed:
    it takes the records lock exclusively, which every recording child holds shared."""
    import fcntl

    try:
        fd = os.open(_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no lock to take: no child can have recorded under it either
        return
    try:
        deadline = time.monotonic() + WAIT_MAX_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


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
        spec: dict[str, Any] | Callable[[], dict[str, Any]],
        settings: Settings | None = None,
        *,
        rename: Callable[[Any], Any] | None = None,
        detach: bool = False,
    ) -> None:
        """spec: the stored spec, or a function that makes it when the rows are written (so a
        command that answers without pydantic's models does not build them for its record).
        rename(value) is what the record shows of its spec and error text (the CLI names a
        spooled standard input ``-`` again: litehit.cli.stdin_input.named_stdin). detach: write
        the rows in a forked child (only the `litehit` process itself asks for it: a child of a
        test runner or of an embedding program must not fork); the recording falls back to the
        calling thread where a fork is unsafe (other threads alive) or impossible."""
        self._settings = settings
        self.rename = rename or (lambda value: value)
        self.kind, self._spec = Kind(kind), spec
        self.detach = detach
        self._job_id: str | None = None
        self._outcome: tuple[str, Any, str | None] | None = None
        self._started: datetime | None = None
        self._finished: datetime | None = None

    @property
    def spec(self) -> dict[str, Any]:
        if callable(self._spec):
            self._spec = self._spec()
        return self._spec

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from litehit.settings import get_settings  # pydantic-settings: only when recording

            self._settings = get_settings()
        return self._settings

    @property
    def job_id(self) -> str | None:
        """The recorded job (None if not recorded). Known before a recording child has written
        its rows, so a command can print it; asking for it reads the settings."""
        if self._job_id is None:
            return None
        try:
            return self._job_id if self.settings.record_jobs else None
        except Exception:  # settings only a recording child read (and warned about)
            return None

    def _forks(self) -> bool:
        """Whether the rows are written by a forked child: asked for, possible, safe (no other
        thread alive) and not as a container's init process (its exit would kill the child)."""
        return self.detach and hasattr(os, "fork") and threading.active_count() == 1 and os.getpid() != 1

    def __enter__(self) -> JobRecorder:
        if self._forks() or self.settings.record_jobs:  # a recording child reads the settings itself
            self._started = datetime.now(UTC)
            self._job_id = uuid.uuid4().hex
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
        if self._started is None:
            return
        self._finished = datetime.now(UTC)
        if isinstance(exc, BrokenPipeError) and self._outcome is not None:
            exc = None  # the result was complete; only its reader went away (`litehit query F | head -1`)
        if self._forks() and self._fork(exc):
            return  # this is the command: its child records
        if not self._record(exc):
            self._job_id = None

    def _record(self, exc: BaseException | None) -> bool:
        try:
            if not self.settings.record_jobs:
                return False
            ensure_schema(self.settings.db_url)
            self._write(exc)
        except Exception as problem:  # the settings themselves may be what failed
            where = self._settings.db_url if self._settings is not None else "the database"
            print(f"litehit: warning: not recording this run in {where}: {problem}", file=sys.stderr)
            return False
        return True

    def _fork(self, exc: BaseException | None) -> bool:
        """Forks the recording child (which records, then exits); True in the parent, False when
        no child could be started. The child takes the records lock's shared hold from the parent,
        so a reader that starts after this command exits still waits for the rows."""
        import fcntl

        for stream in (sys.stdout, sys.stderr):  # before the lock: a slow reader must not hold it
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the command reports it itself
                stream.flush()
        try:
            lock = os.open(_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(lock, fcntl.LOCK_SH)
            pid = os.fork()
        except OSError:
            os.close(lock)
            return False
        if pid:
            os.close(lock)  # the child's descriptor keeps the shared hold
            return True
        code = 1
        try:
            os.setsid()  # the terminal's Ctrl-C after the command returned does not reach it
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # a pipe on stdout ends with the command (stderr stays: the warning)
            code = 0 if self._record(exc) else 1
            sys.stderr.flush()
        finally:
            os._exit(code)  # nothing of the command runs twice: no atexit, no buffered output

    def _write(self, exc: BaseException | None) -> None:
        from litehit.db.models import Job
        from litehit.db.session import session_scope

        with session_scope(self.settings.db_url) as session:
            job = Job(
                id=self.job_id,
                created_at=self._started,
                kind=self.kind,
                source="cli",
                spec=self.rename(self.spec),
                stage=Stage.DONE,
                started_at=self._started,
                finished_at=self._finished,
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
            self._job_id = job.id

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
