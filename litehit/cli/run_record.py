"""Job records of CLI runs, in the same database as the service (the embedded SQLite by
default), so ``litehit jobs`` lists past runs.

The row is written once, when the run ends (a killed command leaves no stale "running" row);
opening and migrating the database happens in a background thread while the run works.
Recording never breaks a command: if the database is unusable, the command warns and carries on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from litehit.db.migrate import SCHEMA_HEAD
from litehit.db.states import JobState, LaneState, Stage
from litehit.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from litehit.policies.result import PolicySweepResult
    from litehit.query import QueryResult
    from litehit.replay.runner import ReplayResult

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

    with JobRecorder("replay", spec_dict) as rec:
        result = run_replay(spec)
        rec.replay_succeeded(result)       # or rec.query_succeeded(result, path)
    rec.job_id                             # the recorded job (None if not recorded)
    # an exception inside the block records the job as failed (and is re-raised)
    """

    def __init__(
        self,
        kind: str,
        spec: dict[str, Any],
        settings: Settings | None = None,
        *,
        rename: Callable[[Any], Any] | None = None,
    ) -> None:
        """rename(value) is what the record shows of its spec and error text (the CLI names a
        spooled standard input ``-`` again: litehit.cli.stdin_input.named_stdin)."""
        self.settings = settings or get_settings()
        self.rename = rename or (lambda value: value)
        self.kind, self.spec = kind, spec
        self.job_id: str | None = None
        self._ready: threading.Thread | None = None
        self._problem: BaseException | None = None
        self._outcome: Any = None
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

    def replay_succeeded(self, result: ReplayResult) -> None:
        self._outcome = ("replay", result)

    def query_succeeded(self, result: QueryResult, output: str | None) -> None:
        self._outcome = ("query", result, output)

    def sweep_succeeded(self, result: PolicySweepResult, output: str | None) -> None:
        self._outcome = ("policy_sweep", result, output)

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
        from litehit.db.models import Job, LaneRun, utcnow
        from litehit.db.session import session_scope
        from litehit.db.summaries import record_summaries

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
            elif self._outcome is not None and self._outcome[0] == "replay":
                self._replay_done(session, job, self._outcome[1], LaneRun)
            elif self._outcome is not None and self._outcome[0] == "policy_sweep":
                _, sweep, output = self._outcome
                job.state, job.output_path = JobState.SUCCEEDED, output
                job.stats = {"lanes": len(sweep.lanes), "runs": sum(len(lane.results) for lane in sweep.lanes)}
                _record_runs(session, job.id, sweep)
            elif self._outcome is not None:
                _, result, output = self._outcome
                job.state, job.output_path = JobState.SUCCEEDED, output
                job.stats = {"rows": result.rows, "instances": len(result.instances)}
                record_summaries(session, job.id, result)
            else:
                job.state = JobState.FAILED
                job.error = "ended without a result"
            self.job_id = job.id

    @staticmethod
    def _replay_done(session: Session, job: Any, result: ReplayResult, lane_model: Any) -> None:
        job.state = JobState.SUCCEEDED
        job.output_path = str(result.facts_path.resolve())
        job.stats = {
            "trace_format": result.trace_format.value,
            "lines": result.lines,
            "reads": result.reads,
            "blocks": result.blocks,
            "facts_rows": result.facts_rows,
            "seconds": round(result.elapsed_s, 3),
        }
        for i, lane in enumerate(result.lanes):
            session.add(
                lane_model(
                    job_id=job.id,
                    lane=i,
                    instance_id=lane.instance_id,
                    state=LaneState.SUCCEEDED,
                    requests=lane.requests,
                    requests_total=lane.requests,
                    blocks=lane.blocks,
                    blocks_total=lane.blocks,
                    unique_blocks=lane.unique_blocks,
                    memory_bytes=lane.memory_bytes,
                    expired_blocks=lane.expired_blocks,
                    finished_at=job.finished_at,
                )
            )


def _record_runs(session: Session, job_id: str, sweep: PolicySweepResult) -> None:
    """One succeeded SweepRun row per lane x policy x capacity, as the service stores them."""
    from litehit.db.models import SweepRun

    run = 0
    for lane_index, lane in enumerate(sweep.lanes):
        slots = list(dict.fromkeys(r.capacity or r.capacity_gb for r in lane.results))
        for r in lane.results:
            details: dict[str, Any] = {}
            if r.policy == "wa" and lane.wa is not None:
                details["wa"] = lane.wa.model_dump(mode="json")
            session.add(
                SweepRun(
                    job_id=job_id,
                    run=run,
                    lane=lane_index,
                    instance_id=lane.lane,
                    policy=r.policy,
                    slot=slots.index(r.capacity or r.capacity_gb),
                    capacity_gb=r.capacity_gb,
                    capacity_blocks=r.capacity_blocks,
                    state=LaneState.SUCCEEDED,
                    requests=r.requests,
                    hit_blocks=r.hit_blocks,
                    hit_tokens=r.hit_tokens,
                    input_tokens=r.input_tokens,
                    hit_ratio=r.hit_ratio,
                    evictions=r.evictions,
                    details=details,
                )
            )
            run += 1
