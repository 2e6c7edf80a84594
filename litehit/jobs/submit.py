"""Submitting jobs: validate a request and store it as a queued job row (then the caller
enqueues its first task). Light on purpose (no C engine, numpy or matplotlib): the API submits
here, the workers run what was stored. One function for every kind over a trace, one for queries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from litehit.db.models import Job, Trace
from litehit.errors import ConfigError, ConfigIssue, LiteHitError, StorageError
from litehit.jobs.base import TraceKind
from litehit.jobs.errors import IdempotencyConflict
from litehit.jobs.facts_kind import FactsKind
from litehit.shorthand import Shorthand, shorthand_config
from litehit.spec import ReplaySpec, TraceFormat, config_error, parse_replay_spec, routing_issues
from litehit.storage import Storage
from litehit.traces.formats import detect_format

__all__ = ["Enqueue", "create_facts_job", "create_trace_job", "parse_options", "request_hash"]

Enqueue = Callable[..., None]
"""enqueue(task_name, *args): sends a task (Celery in the service; tests pass their own)."""


def _existing(session: Session, kind: str, idempotency_key: str | None, digest: str) -> Job | None:
    """The job an Idempotency-Key already names, if the request is the same; else a conflict."""
    if not idempotency_key:
        return None
    job = session.scalars(select(Job).where(Job.kind == kind, Job.idempotency_key == idempotency_key)).first()
    if job is not None and job.request_hash != digest:
        raise IdempotencyConflict(f"Idempotency-Key {idempotency_key!r} was used for a different request")
    return job


def request_hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


SHORTHAND_FIELDS = frozenset(
    {
        "block_sizes",
        "ttl_seconds",
        "model",
        "kv_dtype",
        "kv_bytes_per_token",
        "block_bytes",
        "prefix_hash",
        "linear_step",
        "linear_state_bytes",
    }
)
"""Fields of a replay request that make it the shorthand (litehit.shorthand) rather than a config."""


def _expand_shorthand(
    session: Session, storage: Storage, config: dict[str, Any], trace_id: str | None
) -> dict[str, Any]:
    """The original config a shorthand request stands for (its trace read for the format when the
    request does not name it); ConfigError naming the request's fields."""
    given = sorted(SHORTHAND_FIELDS & config.keys())
    clash = [f for f in ("instances", "instance_groups", "override_instance_id") if config.get(f)]
    if clash:
        raise ConfigError(
            [ConfigIssue(clash[0], None, f"give the shorthand ({', '.join(given)}) or a config, not both")]
        )
    fmt_text = config.get("trace_format")
    if fmt_text is None:
        fmt = _detected_format(session, storage, config, trace_id)
    else:
        try:
            fmt = TraceFormat(fmt_text)
        except ValueError:
            choices = ", ".join(f.value for f in TraceFormat)
            raise ConfigError([ConfigIssue("trace_format", fmt_text, f"expected one of {choices}")]) from None
    options = Shorthand(
        trace_format=fmt,
        block_size=config.get("block_size"),
        block_sizes=config.get("block_sizes"),
        ttl_seconds=config.get("ttl_seconds") or (0,),
        model=config.get("model"),
        kv_dtype=config.get("kv_dtype"),
        kv_bytes_per_token=config.get("kv_bytes_per_token"),
        block_bytes=config.get("block_bytes"),
        prefix_hash=config.get("prefix_hash"),
        workers=config.get("pipeline_worker_count"),
        extended=config.get("facts_format") == "extended",
        linear_step=config.get("linear_step"),
        linear_state_bytes=config.get("linear_state_bytes"),
    )
    expanded = shorthand_config(options, config.get("trace_file_path", ""), "")
    expanded.pop("output_result_path")
    return expanded


def _detected_format(session: Session, storage: Storage, config: dict[str, Any], trace_id: str | None) -> TraceFormat:
    if trace_id is not None:
        trace = session.get(Trace, trace_id)
        if trace is None:
            raise ConfigError([ConfigIssue("trace_id", trace_id, "no uploaded trace with this id")])
        return TraceFormat(trace.trace_format)
    text = config.get("trace_file_path")
    try:
        if not isinstance(text, str) or not text:
            raise StorageError("give trace_id or a trace_file_path in the storage root")
        fmt = detect_format(storage.user_path(text))
    except StorageError as exc:
        raise ConfigError([ConfigIssue("trace_file_path", text, str(exc))]) from None
    except LiteHitError as exc:
        raise ConfigError([ConfigIssue("trace_format", None, str(exc))]) from None
    if fmt is None:
        raise ConfigError([ConfigIssue("trace_file_path", text, "the trace has no rows")])
    return fmt


def _replay_config(
    session: Session, storage: Storage, config: dict[str, Any], trace_id: str | None
) -> tuple[dict[str, Any], ReplaySpec, Trace | None]:
    """A replay request's config, validated, with its trace resolved inside the storage root
    (relative path) and its format detected when not given. ConfigError lists every issue."""
    config = dict(config)
    config.pop("output_result_path", None)
    if SHORTHAND_FIELDS & config.keys():
        config = _expand_shorthand(session, storage, config, trace_id)
    issues: list[ConfigIssue] = []
    spec: ReplaySpec | None = None
    try:  # the config itself first, so that every field error is reported
        spec = parse_replay_spec({**config, "trace_file_path": "<trace>", "output_result_path": "<job>"})
    except ConfigError as exc:
        issues += exc.issues
    trace: Trace | None = None
    path = None
    if trace_id is not None:
        trace = session.get(Trace, trace_id)
        if trace is None:
            issues.append(ConfigIssue("trace_id", trace_id, "no uploaded trace with this id"))
        else:
            path = storage.absolute(trace.path)
    else:
        text = config.get("trace_file_path")
        try:
            if not isinstance(text, str) or not text:
                raise StorageError("give trace_id or a trace_file_path in the storage root")
            path = storage.user_path(text)
        except StorageError as exc:
            issues.append(ConfigIssue("trace_file_path", text, str(exc)))
    if issues or spec is None or path is None:
        raise ConfigError(issues)
    config["trace_file_path"] = storage.relative(path)
    if spec.trace_format is None:
        try:
            fmt = trace.trace_format if trace is not None else detect_format(path)
        except LiteHitError as exc:
            raise ConfigError([ConfigIssue("trace_format", None, str(exc))]) from None
        if fmt is None:
            raise ConfigError([ConfigIssue("trace_file_path", config["trace_file_path"], "the trace has no rows")])
        config["trace_format"] = str(fmt)
    routing = routing_issues(spec, config["trace_format"])  # the trace's rows carry instance ids, or not
    if routing:
        raise ConfigError(routing)
    return config, spec, trace


def _store(session: Session, job: Job) -> tuple[Job, bool]:
    """Commits a new job row. When a concurrent request with the same Idempotency-Key won the
    race (its insert came first), answers with its job: the same request if the digest of the
    original request (job.request_hash) matches, a conflict otherwise."""
    kind, key, digest = job.kind, job.idempotency_key, job.request_hash
    session.add(job)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        winner = _existing(session, kind, key, digest) if key and digest else None
        if winner is None:
            raise
        return winner, False
    return job, True


def _queued_job(
    kind: str,
    spec: dict[str, Any],
    digest: str,
    idempotency_key: str | None,
    source: str,
    *,
    trace: Trace | None = None,
    parent_id: str | None = None,
) -> Job:
    """A new job row, queued."""
    return Job(
        kind=kind,
        spec=spec,
        idempotency_key=idempotency_key or None,
        request_hash=digest,
        trace_id=trace.id if trace else None,
        parent_id=parent_id,
        source=source,
        stats={},
        progress={},
    )


def parse_options(model: type[BaseModel], data: object) -> BaseModel:
    """A kind's options, validated; ConfigError names each bad field and value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc) from None


def create_trace_job(
    kind: TraceKind[Any],
    session: Session,
    storage: Storage,
    config: dict[str, Any],
    options: dict[str, Any] | None = None,
    *,
    trace_id: str | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Validates a job over a trace (a replay config, plus the kind's options under its
    options_field) and stores it as a queued job. Returns (job, created): an existing job comes
    back for a repeated Idempotency-Key with the same request. ConfigError lists every issue.

    The trace is an uploaded trace id, or trace_file_path inside the storage root. Results are
    published under the job (an output_result_path in the config is ignored)."""
    field = kind.options_field
    body: dict[str, Any] = {"config": config, **({field: options} if field else {}), "trace_id": trace_id}
    digest = request_hash(body)
    existing = _existing(session, kind.kind, idempotency_key, digest)
    if existing is not None:
        return existing, False
    issues: list[ConfigIssue] = []
    parsed = None
    if field and kind.options_model is not None:
        try:
            parsed = parse_options(kind.options_model, options)
        except ConfigError as exc:
            issues += [ConfigIssue(f"{field}.{i.path}", i.value, i.message) for i in exc.issues]
    elif options:
        raise ConfigError([ConfigIssue(next(iter(options)), None, f"a {kind.kind} takes no options")])
    try:
        checked, spec, trace = _replay_config(session, storage, config, trace_id)
        kind.check(spec)
    except ConfigError as exc:
        raise ConfigError(exc.issues + issues) from None
    if issues:
        raise ConfigError(issues)
    stored = kind.spec_of(checked, parsed).model_dump(mode="json")
    return _store(session, _queued_job(kind.kind, stored, digest, idempotency_key, source, trace=trace))


def create_facts_job(
    kind: FactsKind[Any],
    session: Session,
    storage: Storage,
    body: BaseModel,
    *,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Stores a queued job of a kind over facts: a replay's, or a facts file in the storage root."""
    digest = request_hash(kind.request_body(body))
    existing = _existing(session, kind.kind, idempotency_key, digest)
    if existing is not None:
        return existing, False
    spec, parent_id = kind.checked(session, storage, body)
    job = _queued_job(kind.kind, spec.model_dump(mode="json"), digest, idempotency_key, source, parent_id=parent_id)
    return _store(session, job)
