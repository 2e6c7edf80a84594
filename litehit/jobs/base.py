"""The contract of a job kind, and the values that pass between its stages.

A kind over a trace (``TraceKind``) declares, once:

- its **spec** (``spec_model``): what a job of the kind is, as stored in ``Job.spec`` and shown by
  the API: the replay config, plus the kind's options under ``options_field``;
- its **parts** (``parts``): the pieces of work that run in parallel, each consuming one lane's
  requests in input order (a ``PartPlan``);
- ``open_part``: a ``PartRun`` that folds a lane's chunks (``feed``) into the part's ``PartOutput``
  (a pydantic result, stored with the part in SQL, and optional arrays, kept in the job's work
  folder until the merge);
- ``merger``: folds the parts' outputs (and, when its parts emit arrays per chunk, every chunk in
  input order) into the kind's result (``Merged``); ``publish`` writes it into the job's folder.

The CLI runs the parts in process over one pass of the trace (litehit.jobs.local); the service
runs each part as a task over the parsed trace and the merge as the last task
(litehit.jobs.stages). Both call the same ``open_part`` and ``merger``. What else the service needs
(task names, routes, public schemas, run records, recovery) follows from these declarations.

Heavy modules (numpy, the C engine, matplotlib) are imported inside the methods that do work:
the API imports every kind to build its routes, and loads none of them.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, NoReturn, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from litehit.db.states import JobState, LaneState, Stage
from litehit.jobs.kinds import Kind

if TYPE_CHECKING:
    from litehit.db.models import Base
    from litehit.replay.plan import ChunkPlan, LaneWork, ReplayPlan
    from litehit.spec import ReplaySpec

__all__ = [
    "Artifact",
    "JobKind",
    "Merged",
    "Merger",
    "PartClaims",
    "PartOutput",
    "PartPlan",
    "PartRun",
    "TraceCounts",
    "TraceJobSpec",
    "TraceKind",
    "UTCDateTime",
    "links_of",
    "part_public_model",
    "raise_in_order",
    "value_at",
    "view_model",
]


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


UTCDateTime = Annotated[datetime, AfterValidator(_utc)]
"""A moment as the API shows it: always with its zone (SQLite hands back naive UTC datetimes,
PostgreSQL aware ones; both answer ...Z)."""


class TraceJobSpec(BaseModel):
    """A job over a trace: the replay config as validated and stored (the service keeps the trace
    relative to the storage root; the CLI records absolute paths). Kinds with options add them as
    one more field, named by ``TraceKind.options_field``."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] = Field(description="the replay config (the original offline config)")

    def replay_spec(self, trace: str, output: str) -> ReplaySpec:
        """The config with its paths resolved: the trace to read and the folder to publish in."""
        from litehit.spec import parse_replay_spec

        return parse_replay_spec({**self.config, "trace_file_path": trace, "output_result_path": output})


class PartPlan(BaseModel):
    """What one part of a job over a trace is: the lane whose requests it consumes, and the lane's
    size in the trace (set once the trace is read)."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    requests_total: int = Field(default=0, description="requests of the lane in the trace")
    blocks_total: int = Field(default=0, description="blocks of the lane in the trace")


class PartClaims(BaseModel):
    """The life of a part, the same for every kind (the claim columns of litehit.jobs.state)."""

    state: LaneState = Field(
        description="queued -> running -> succeeded | failed (running again when its worker was lost)"
    )
    attempts: int = Field(description="times a worker took this part (more than 1 after a lost worker)")
    worker: str | None = Field(description="host:pid of the worker of the last attempt")
    error: str | None = Field(description="why it failed, once failed")
    started_at: UTCDateTime | None = Field(description="when the last attempt started (UTC)")
    finished_at: UTCDateTime | None = Field(description="when it ended (UTC)")


Before = Any
"""What a view shows of a result field before the part succeeded (None makes the field nullable)."""
ViewPaths = Mapping[str, tuple[tuple[str, ...], Before]]
"""A view's field -> (its path in the part's result, what it shows before the part succeeded)."""


def _field_at(model: type[BaseModel], path: tuple[str, ...]) -> Any:
    """The FieldInfo at a path through nested models."""
    field_info = model.model_fields[path[0]]
    if len(path) == 1:
        return field_info
    nested = field_info.annotation
    assert isinstance(nested, type) and issubclass(nested, BaseModel), (model, path)
    return _field_at(nested, path[1:])


def value_at(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a path through a model's JSON (dicts)."""
    value: Any = data
    for name in path:
        value = value[name]
    return value


def view_model(
    name: str,
    doc: str,
    plan: type[PartPlan],
    result: type[BaseModel],
    *,
    totals: bool,
    paths: ViewPaths | None = None,
) -> type[BaseModel]:
    """The fields a kind's part shows besides its claims: the plan's (the lane's totals only with
    `totals`), then the result's own fields (each with its default: what the view shows before
    the part succeeded), or, with `paths`, the fields at those paths in the result (their type
    and description, nullable when shown as None before the part succeeded)."""
    skip = () if totals else ("requests_total", "blocks_total")
    fields: dict[str, Any] = {n: (f.annotation, f) for n, f in plan.model_fields.items() if n not in skip}
    if paths is None:
        for n, f in result.model_fields.items():
            assert not f.is_required(), f"{result.__name__}.{n} needs a default: what a view shows before success"
            fields.setdefault(n, (f.annotation, f))
    else:
        for n, (path, before) in paths.items():
            source = _field_at(result, path)
            annotation = source.annotation if before is not None else source.annotation | None
            fields[n] = (annotation, Field(default=before, description=source.description))
    model: type[BaseModel] = create_model(name, __doc__=doc, **fields)
    return model


def part_public_model(name: str, view: type[BaseModel]) -> type[BaseModel]:
    """The public model of a kind's parts: its view's fields, then the claim columns."""
    claims: dict[str, Any] = {n: (f.annotation, f) for n, f in PartClaims.model_fields.items()}
    model: type[BaseModel] = create_model(name, __base__=view, __doc__=view.__doc__, **claims)
    return model


@dataclass
class PartOutput:
    """What a part found: ``result`` is stored with the part (SQL, as JSON of its model);
    ``arrays`` (numpy, by name) stay in the job's work folder until the merge."""

    result: BaseModel
    arrays: Mapping[str, Any] = field(default_factory=dict)


class PartRun(Protocol):
    """A part at work, fed its lane's chunks in input order."""

    def feed(self, work: LaneWork) -> tuple[Any, ...] | None:
        """Folds the next chunk in; a kind with ``chunk_arrays`` returns that chunk's arrays."""

    def output(self, categories: list[str]) -> PartOutput:
        """The part's output once every chunk was fed (categories: the trace's names by id)."""

    def close(self) -> None:
        """Frees the part's C state (always called, also after a failure)."""

    # A part (or merger) that works a chunk behind its caller in a thread of its own also has
    # ``settle()``: wait for that chunk and raise its failure (see raise_in_order).


def raise_in_order(exc: BaseException, stages: Sequence[object]) -> NoReturn:
    """Raises the error of a run that failed with exc: first the failure of a chunk a stage was
    still working on behind the caller (``settle()``: an earlier chunk's, so first in input
    order), else exc; a facts file that could not be written as ReplayError."""
    from litehit.errors import PublishError, ReplayError

    failure = exc
    for stage in stages:
        settle = getattr(stage, "settle", None)
        if settle is None:
            continue
        try:
            settle()
        except Exception as earlier:
            failure = earlier
            break
    if isinstance(failure, PublishError):
        raise ReplayError(str(failure)) from None
    if failure is exc:
        raise exc
    raise failure from None


@dataclass(frozen=True)
class TraceCounts:
    """What the pass over the trace counted (the CLI's loop, or the service's parse stage)."""

    trace_format: str
    lines: int
    rows: int
    reads: int
    blocks: int
    seconds: float  # the pass and the work before the merge's finish


@dataclass(frozen=True)
class Merged:
    """A kind's merged result: ``value`` is its result object (what the CLI prints and both paths
    publish), ``stats`` what the job row records of it."""

    value: Any
    stats: dict[str, Any] = field(default_factory=dict)


class Merger(Protocol):
    """The merge of one job: every chunk in input order (kinds with ``chunk_arrays`` only), then
    the parts' outputs in part order. Nothing is published unless ``finish`` returns; ``close``
    is always called."""

    def add_chunk(self, chunk: ChunkPlan, outputs: Sequence[tuple[Any, ...]]) -> None: ...

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Artifact:
    """A file a succeeded job published in its folder (``jobs/<id>/<file>``), served at
    ``GET /v1<route>/{id}/<path>``. ``{name}`` fields of path and file take the values listed in
    ``choices``. ``link`` is the key of its URL in the job's ``links`` (a template over the
    choices; fields in ``link_defaults`` take that value there)."""

    path: str
    file: str
    media_type: str | Mapping[str, str]  # one type, or one per value of the "ext" field
    summary: str
    link: str | None = None
    link_defaults: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ready: str = "results exist"  # "the query is queued; <ready> only once it succeeded"
    download_name: str | None = None  # "litehit_facts_{id}.csv"

    def links(self, base: str) -> dict[str, str]:
        if self.link is None:
            return {}
        free = [c for c in self.choices if c not in self.link_defaults]
        out: dict[str, str] = {}
        for value in self.choices[free[0]] if free else (None,):
            values = {**self.link_defaults, **({free[0]: value} if free and value is not None else {})}
            out[self.link.format(**values)] = f"{base}/{self.path.format(**values)}"
        return out


SpecT = TypeVar("SpecT", bound=BaseModel)


class SummaryTable:
    """A kind's SQL summary table, named by its class in litehit.db.models and imported when first
    read, so that a kind's module (and the CLI command that uses it) loads without SQLAlchemy."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> type[Base]:
        from litehit.db import models

        table: type[Base] = getattr(models, self.name)
        return table


class JobKind(ABC, Generic[SpecT]):
    """What every kind declares. Each kind's module holds one instance, ``KIND``."""

    kind: ClassVar[Kind]
    what: ClassVar[str]  # "replay", "policy sweep": in summaries and messages
    route: ClassVar[str]  # "/replays": its HTTP resource under /v1
    tasks: ClassVar[str]  # "replay": its Celery tasks are litehit.<tasks>.<stage>
    spec_model: ClassVar[type[BaseModel]]
    public_name: ClassVar[str]  # "ReplayPublic": the name of its public model
    first_stage: ClassVar[Stage]  # the stage its first task claims
    part_stage: ClassVar[Stage | None] = None  # its parallel stage, if it has one
    artifacts: ClassVar[tuple[Artifact, ...]] = ()
    summary_table: ClassVar[SummaryTable | None] = None  # SQL summary rows its view shows

    def task(self, stage: str) -> str:
        return f"litehit.{self.tasks}.{stage}"

    @property
    @abstractmethod
    def first_task(self) -> str:
        """The task a queued job is sent to."""

    @abstractmethod
    def stage_tasks(self) -> dict[Stage, str]:
        """The task of each of its one-task stages (the recovery sweep sends them again)."""

    def summary_rows(self, job_id: str, value: Any, spec: Any) -> list[Base]:
        """Its summary rows of a merged value (replacing the job's earlier ones)."""
        return []

    def summary_order(self) -> tuple[str, ...]:
        """Columns that order its summary rows within a job."""
        return ()

    @abstractmethod
    def public_fields(self) -> dict[str, Any]:
        """What its public model adds to the job's common fields: name -> (type, Field)."""

    @abstractmethod
    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        """The job's public view from its row, its parts' views and its summary rows."""


class TraceKind(JobKind[SpecT]):
    """A kind over a trace: parse it once, run the parts in parallel, merge once."""

    first_stage: ClassVar[Stage] = Stage.PARSE
    part_stage: ClassVar[Stage | None] = Stage.LANES
    part_task: ClassVar[str] = "lane"  # its part task is litehit.<tasks>.<part_task>
    part_noun: ClassVar[str] = "lane"
    parts_field: ClassVar[str] = "lanes"  # the view's list of parts
    parts_description: ClassVar[str] = "one row per lane"
    part_view_name: ClassVar[str]  # "LanePublic": the name of its parts' public model
    part_view_doc: ClassVar[str] = "One part of the job; its result once succeeded."
    view_totals: ClassVar[bool] = False  # its parts show their lane's size in the trace
    view_paths: ClassVar[ViewPaths | None] = None  # None: a part shows its result's own fields
    options_field: ClassVar[str | None] = None  # "sweep": the request field holding its options
    options_model: ClassVar[type[BaseModel] | None] = None
    options_description: ClassVar[str] = ""
    ttl_lanes: ClassVar[bool] = True  # False: a lane with a TTL is refused (policies model no TTL)
    hybrid_lanes: ClassVar[bool] = False  # True: hybrid lanes (linear_step > 0) run (the replay)
    shared_parts: ClassVar[bool] = False  # True: part_units may put several parts in a unit
    chunk_arrays: ClassVar[int] = 0  # arrays each part emits per chunk, merged in input order
    part_arrays: ClassVar[tuple[str, ...]] = ()  # names of the arrays of a part's output
    cancelled: ClassVar[str] = "cancelled; nothing published"  # the error of a cancelled job

    @property
    def first_task(self) -> str:
        return self.task("parse")

    def stage_tasks(self) -> dict[Stage, str]:
        return {Stage.PARSE: self.task("parse"), Stage.MERGE: self.task("merge")}

    @property
    def part_task_name(self) -> str:
        return self.task(self.part_task)

    @functools.cached_property
    def part_view_model(self) -> type[BaseModel]:
        """The fields a part shows besides its claims (from its plan and result models)."""
        name = self.part_view_name.removesuffix("Public") + "View"
        return view_model(
            name,
            self.part_view_doc,
            self.plan_model(),
            self.result_model(),
            totals=self.view_totals,
            paths=self.view_paths,
        )

    @functools.cached_property
    def part_public(self) -> type[BaseModel]:
        return part_public_model(self.part_view_name, self.part_view_model)

    def check(self, spec: ReplaySpec) -> None:
        """Refuses a config the kind cannot run (ConfigError naming the field)."""
        if not self.hybrid_lanes:
            from litehit.errors import ConfigError, ConfigIssue

            for i, inst in enumerate(spec.instances):
                if inst.linear_step > 0:
                    raise ConfigError(
                        [
                            ConfigIssue(
                                f"instances[{i}].linear_step",
                                inst.linear_step,
                                f"lane {inst.instance_id} is a hybrid lane (linear-attention states): the {self.what} "
                                "works on Full-only lanes; litehit replay, then query, curve, misses, plot or report of its facts answer hybrid lanes",
                            )
                        ]
                    )
        if not self.ttl_lanes:
            from litehit.policies.options import check_sweepable

            check_sweepable(spec)

    def spec_of(self, config: dict[str, Any], options: BaseModel | None) -> SpecT:
        """The stored spec of a validated config and options."""
        data: dict[str, Any] = {"config": config}
        if self.options_field:
            data[self.options_field] = options
        spec: SpecT = self.spec_model.model_validate(data)  # type: ignore[assignment]
        return spec

    def options_of(self, spec: SpecT) -> BaseModel | None:
        if not self.options_field:
            return None
        options: BaseModel = getattr(spec, self.options_field)
        return options

    @abstractmethod
    def plan_model(self) -> type[PartPlan]:
        """The model of its parts' plans."""

    @abstractmethod
    def result_model(self) -> type[BaseModel]:
        """The model of its parts' results."""

    @abstractmethod
    def parts(self, spec: SpecT, plan: ReplayPlan) -> list[PartPlan]:
        """The parts of a job, in order (a part's index is its position)."""

    def chunk_arrays_of(self, part: PartPlan) -> int:
        """The arrays this part emits per chunk (``chunk_arrays``, or 0 for a part that emits none:
        its ``feed`` returns None and the merge sees an empty tuple)."""
        return self.chunk_arrays

    def part_label(self, part: PartPlan) -> str:
        """What the recovery's messages name a part by."""
        return part.instance_id

    def describe(self, part: PartPlan) -> str:
        """What a part's failure is prefixed with in the job's error."""
        return f"lane {part.instance_id}"

    @abstractmethod
    def open_part(self, spec: SpecT, plan: ReplayPlan, part: PartPlan) -> PartRun: ...

    def part_units(self, plan: ReplayPlan, parts: Sequence[PartPlan]) -> list[list[int]]:
        """The parts fed together, each chunk to one after the other (indices into parts, in part
        order; every part in one unit): in process by one thread, in the service by the task of
        the unit's first part, which takes the others along while they wait. A part may still run
        alone (the service's recovery), so a unit's parts must give what they give apart. Default
        (``shared_parts`` False): each part alone."""
        return [[k] for k in range(len(parts))]

    def open_unit(self, spec: SpecT, plan: ReplayPlan, parts: Sequence[PartPlan]) -> list[PartRun]:
        """The runs of a unit's parts (part_units), in its order; they may share state, as each
        chunk reaches them one after the other in that order. Default: open_part each."""
        return [self.open_part(spec, plan, part) for part in parts]

    @abstractmethod
    def merger(self, spec: SpecT, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]) -> Merger: ...

    @abstractmethod
    def publish(self, value: Any, out: Path) -> Path:
        """Writes a merged value's result document and plots into the job's output folder (the
        service); returns its main file, the job's output."""

    def part_view(
        self, plan: dict[str, Any], progress: dict[str, Any], result: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The fields a part shows besides its claims, from its plan, progress and result."""
        if result is None:
            return {**plan, **progress}
        if self.view_paths is None:
            return {**plan, **progress, **result}
        return {**plan, **progress, **{n: value_at(result, path) for n, (path, _) in self.view_paths.items()}}

    def public_fields(self) -> dict[str, Any]:
        return {
            "trace_id": (
                str | None,
                Field(description="the uploaded trace it runs on (null: a trace_file_path in the storage root)"),
            ),
            self.parts_field: (list[self.part_public], Field(description=self.parts_description)),  # type: ignore[name-defined]
            **self.extra_public_fields(),
        }

    def extra_public_fields(self) -> dict[str, Any]:
        return {"links": (dict[str, str], Field(description="URLs of its result files, once succeeded"))}

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        return {**job, self.parts_field: parts, "links": links_of(self, job)}


def links_of(kind: JobKind[Any], job: Mapping[str, Any]) -> dict[str, str]:
    """URLs of a succeeded job's published files, by their keys in ``links``."""
    if job["state"] != JobState.SUCCEEDED:
        return {}
    base = f"/v1{kind.route}/{job['id']}"
    out: dict[str, str] = {}
    for artifact in kind.artifacts:
        out.update(artifact.links(base))
    return out
