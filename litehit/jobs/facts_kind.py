"""Kinds over published facts (a query, a tier split, a tier plan): one stage in one task, over a
replay's facts or a facts file in the storage root. What they share lives here: the request's
facts source, finding the facts of a queued job, the one task, the run that computes, publishes
and records summary rows. A kind adds its options, its ``compute`` (the CLI runs the same one),
its published files and its view.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from litehit.db.states import JobState, Stage
from litehit.errors import ConfigError, ConfigIssue, QueryError, StorageError
from litehit.jobs.base import JobKind, SpecT
from litehit.jobs.kinds import Kind
from litehit.text import Text

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from litehit.db.models import Base, Job
    from litehit.storage import Storage

__all__ = ["DocumentKind", "FactsKind", "FactsSource", "StoredFacts"]


class FactsSource(BaseModel):
    """Where a job's facts come from: a replay job, or a facts file in the storage root."""

    replay_id: Text | None = Field(default=None, description="the replay whose facts to read")
    facts_path: Text | None = Field(default=None, description="or a facts file inside the storage root")


class StoredFacts(BaseModel):
    facts_path: str | None = Field(default=None, description="a facts file (null: the replay's facts)")


class FactsKind(JobKind[SpecT]):
    first_stage: ClassVar[Stage] = Stage.QUERY  # the one stage: the work on the facts
    create_model: ClassVar[type[BaseModel]]
    submit_summary: ClassVar[str]  # the POST route's summary

    def stage_tasks(self) -> dict[Stage, str]:
        return {Stage.QUERY: self.task("run")}

    @property
    def first_task(self) -> str:
        return self.task("run")

    def out_dir(self, storage: Storage, job_id: str) -> Path:
        """Its published files: jobs/<id>/<tasks>/."""
        return storage.job_dir(job_id) / self.tasks

    # --- submission ---

    def request_body(self, body: BaseModel) -> dict[str, Any]:
        """What the idempotency digest covers."""
        return body.model_dump(mode="json")

    def source(self, session: Session, storage: Storage, body: Any) -> tuple[str | None, Job | None]:
        """(facts path relative to the storage root, the replay job): exactly one is given."""
        from litehit.db.models import Job

        if (body.replay_id is None) == (body.facts_path is None):
            raise ConfigError(
                [ConfigIssue("replay_id", body.replay_id, "give exactly one of replay_id and facts_path")]
            )
        if body.replay_id is not None:
            parent = session.get(Job, body.replay_id)
            if parent is None or parent.kind != Kind.REPLAY:
                raise ConfigError([ConfigIssue("replay_id", body.replay_id, "no replay job with this id")])
            return None, parent
        try:
            return storage.relative(storage.user_path(body.facts_path or "")), None
        except StorageError as exc:
            raise ConfigError([ConfigIssue("facts_path", body.facts_path, str(exc))]) from None

    def checked(self, session: Session, storage: Storage, body: Any) -> tuple[BaseModel, str | None]:
        """The stored spec and the replay it reads (ConfigError naming the field otherwise)."""
        relative, parent = self.source(session, storage, body)
        options = body.model_dump(exclude={"replay_id", "facts_path"})
        spec = self.spec_model.model_validate({**options, "facts_path": relative})
        return spec, parent.id if parent is not None else None

    # --- the work ---

    def facts_of(self, session: Session, storage: Storage, job: Job) -> Path:
        from litehit.db.models import Job

        relative = (job.spec or {}).get("facts_path")
        if relative:
            return storage.absolute(relative)
        parent = session.get(Job, job.parent_id) if job.parent_id else None
        if parent is None or parent.state != JobState.SUCCEEDED or not parent.output_path:
            state = parent.state if parent else "missing"
            raise QueryError(f"the replay {job.parent_id} has no published facts (it is {state})")
        return storage.absolute(parent.output_path)

    @abstractmethod
    def run(self, session: Session, storage: Storage, job: Job) -> tuple[dict[str, Any], str, list[Base]]:
        """Runs a queued job: its files published in its folder; returns the job's stats, its
        output path and its summary rows."""


class DocumentKind(FactsKind[SpecT]):
    """A kind whose result is one JSON document (and a picture) computed from the facts."""

    result_file: ClassVar[str]  # the JSON document it publishes in its folder (the CLI's -o bytes)
    plot_file: ClassVar[str]

    @abstractmethod
    def compute(
        self, facts: Path, spec: Any, *, replay: Job | None = None, storage: Storage | None = None
    ) -> dict[str, Any]:
        """The kind's document from a facts file: with the replay that published them (and the
        storage holding its trace) when known; the CLI calls it with neither."""

    def stats_of(self, document: dict[str, Any]) -> dict[str, Any]:
        """What the job row keeps of the document beside its summary rows."""
        return {}

    def publish(self, document: dict[str, Any], out: Path, *, plot: Path | None = None) -> Path:
        """Publishes the document as JSON at `out` (and its picture at `plot`)."""
        from litehit.publish import publish_bytes

        path = publish_bytes(out, json.dumps(document, indent=1).encode() + b"\n")
        if plot is not None:
            self.plot(document, plot)
        return path

    @abstractmethod
    def plot(self, document: dict[str, Any], path: Path) -> Path:
        """Draws the document's picture at path (.png or .svg)."""

    def publish_more(self, document: dict[str, Any], facts: Path, out: Path, job: Job, replay: Job | None) -> None:
        """Files a job publishes beside its document and plot (none unless a kind adds some)."""

    def run(self, session: Session, storage: Storage, job: Job) -> tuple[dict[str, Any], str, list[Base]]:
        from litehit.db.models import Job

        spec = self.spec_model.model_validate(job.spec)
        facts = self.facts_of(session, storage, job)
        parent = session.get(Job, job.parent_id) if job.parent_id else None
        document = self.compute(facts, spec, replay=parent, storage=storage)
        out = self.out_dir(storage, job.id)
        out.mkdir(parents=True, exist_ok=True)
        self.publish(document, out / self.result_file, plot=out / self.plot_file)
        self.publish_more(document, facts, out, job, parent)
        return self.stats_of(document), storage.relative(out), list(self.summary_rows(job.id, document, spec))
