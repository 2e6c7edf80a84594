"""Submitting jobs: validate a request and store it as a queued job row. Light on purpose (no C
engine, numpy or matplotlib): the API imports this, the workers import the execution modules.

Task names live here too, so that the API enqueues by name without importing the tasks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from litehit.capacity import DEFAULT_TARGETS, parse_capacities
from litehit.db.models import Job, Trace
from litehit.errors import ConfigError, ConfigIssue, LiteHitError, QueryError, StorageError
from litehit.kv_models import KV_BYTES_ASSUMED, assumed_kv_note
from litehit.policies.options import check_sweepable, parse_sweep_options
from litehit.shorthand import Shorthand, shorthand_config
from litehit.spec import ReplaySpec, TraceFormat, parse_replay_spec
from litehit.storage import Storage
from litehit.traces.formats import detect_format
from litehit.window.options import parse_window_options
from worker.errors import IdempotencyConflict

__all__ = [
    "FIRST_TASK",
    "LANE_TASK",
    "MERGE_TASK",
    "PARSE_TASK",
    "PROFILE_KIND",
    "PROFILE_LANE_TASK",
    "PROFILE_MERGE_TASK",
    "PROFILE_PARSE_TASK",
    "QUERY_TASK",
    "SWEEP_KIND",
    "SWEEP_MERGE_TASK",
    "SWEEP_PARSE_TASK",
    "SWEEP_RUN_TASK",
    "WINDOW_KIND",
    "WINDOW_LANE_TASK",
    "WINDOW_MERGE_TASK",
    "WINDOW_PARSE_TASK",
    "Enqueue",
    "create_profile_job",
    "create_query_job",
    "create_replay_job",
    "create_sweep_job",
    "create_window_job",
    "request_hash",
]

PARSE_TASK = "litehit.replay.parse"
LANE_TASK = "litehit.replay.lane"
MERGE_TASK = "litehit.replay.merge"
QUERY_TASK = "litehit.query.run"
SWEEP_PARSE_TASK = "litehit.sweep.parse"
SWEEP_RUN_TASK = "litehit.sweep.run"
SWEEP_MERGE_TASK = "litehit.sweep.merge"
WINDOW_PARSE_TASK = "litehit.window.parse"
WINDOW_LANE_TASK = "litehit.window.lane"
WINDOW_MERGE_TASK = "litehit.window.merge"
PROFILE_PARSE_TASK = "litehit.profile.parse"
PROFILE_LANE_TASK = "litehit.profile.lane"
PROFILE_MERGE_TASK = "litehit.profile.merge"

SWEEP_KIND = "policy_sweep"
WINDOW_KIND = "window"
PROFILE_KIND = "profile"
FIRST_TASK = {  # a queued job's task
    "replay": PARSE_TASK,
    "query": QUERY_TASK,
    SWEEP_KIND: SWEEP_PARSE_TASK,
    WINDOW_KIND: WINDOW_PARSE_TASK,
    PROFILE_KIND: PROFILE_PARSE_TASK,
}

Enqueue = Callable[..., None]  # enqueue(task_name, *args)


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
    {"block_sizes", "ttl_seconds", "model", "kv_dtype", "kv_bytes_per_token", "block_bytes", "prefix_hash"}
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


def create_replay_job(
    session: Session,
    storage: Storage,
    config: dict[str, Any],
    *,
    trace_id: str | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Validates a replay request and stores it as a queued job. Returns (job, created); an
    existing job comes back for a repeated Idempotency-Key with the same request.

    The trace is an uploaded trace id, or trace_file_path inside the storage root. The facts are
    published under the job (an output_result_path in the config is ignored)."""
    digest = request_hash({"config": config, "trace_id": trace_id})
    existing = _existing(session, "replay", idempotency_key, digest)
    if existing is not None:
        return existing, False
    checked, _, trace = _replay_config(session, storage, config, trace_id)
    return _store(session, _queued_job("replay", checked, digest, idempotency_key, trace, source))


def _queued_job(
    kind: str, spec: dict[str, Any], digest: str, idempotency_key: str | None, trace: Trace | None, source: str
) -> Job:
    """A new job row over a trace, queued."""
    return Job(
        kind=kind,
        spec=spec,
        idempotency_key=idempotency_key or None,
        request_hash=digest,
        trace_id=trace.id if trace else None,
        source=source,
        stats={},
        progress={},
    )


def _create_options_job(
    session: Session,
    storage: Storage,
    kind: str,
    config: dict[str, Any],
    field: str,
    data: dict[str, Any],
    parse: Callable[[object], BaseModel],
    *,
    trace_id: str | None,
    idempotency_key: str | None,
    source: str,
) -> tuple[Job, bool]:
    """Validates a replay config without TTL lanes plus the job's options under `field` (parsed
    by `parse`) and stores them as a queued job of `kind`; ConfigError lists every issue."""
    digest = request_hash({"config": config, field: data, "trace_id": trace_id})
    existing = _existing(session, kind, idempotency_key, digest)
    if existing is not None:
        return existing, False
    issues: list[ConfigIssue] = []
    options = None
    try:
        options = parse(data)
    except ConfigError as exc:
        issues += [ConfigIssue(f"{field}.{i.path}", i.value, i.message) for i in exc.issues]
    try:
        checked, spec, trace = _replay_config(session, storage, config, trace_id)
        check_sweepable(spec)
    except ConfigError as exc:
        raise ConfigError(exc.issues + issues) from None
    if issues or options is None:
        raise ConfigError(issues)
    stored = {"config": checked, field: options.model_dump(mode="json")}
    return _store(session, _queued_job(kind, stored, digest, idempotency_key, trace, source))


def create_sweep_job(
    session: Session,
    storage: Storage,
    config: dict[str, Any],
    sweep: dict[str, Any],
    *,
    trace_id: str | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Validates a policy sweep (a replay config plus SweepOptions under "sweep") and stores it
    as a queued job; TTL lanes are rejected (policies model no TTL)."""
    return _create_options_job(
        session,
        storage,
        SWEEP_KIND,
        config,
        "sweep",
        sweep,
        parse_sweep_options,
        trace_id=trace_id,
        idempotency_key=idempotency_key,
        source=source,
    )


def create_window_job(
    session: Session,
    storage: Storage,
    config: dict[str, Any],
    window: dict[str, Any],
    *,
    trace_id: str | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Validates a window sizing (a replay config plus WindowOptions under "window") and stores
    it as a queued job; TTL lanes are rejected (a missing key that was inserted was evicted)."""
    return _create_options_job(
        session,
        storage,
        WINDOW_KIND,
        config,
        "window",
        window,
        parse_window_options,
        trace_id=trace_id,
        idempotency_key=idempotency_key,
        source=source,
    )


def create_profile_job(
    session: Session,
    storage: Storage,
    config: dict[str, Any],
    options: dict[str, Any] | None = None,
    *,
    trace_id: str | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Validates a workload profile (a replay config; TTL lanes are profiled with their TTL) and
    stores it as a queued job. A profile has no options: `options` must be empty."""
    if options:
        raise ConfigError([ConfigIssue(next(iter(options)), None, "a profile takes no options")])
    digest = request_hash({"config": config, "trace_id": trace_id})
    existing = _existing(session, PROFILE_KIND, idempotency_key, digest)
    if existing is not None:
        return existing, False
    checked, _, trace = _replay_config(session, storage, config, trace_id)
    return _store(session, _queued_job(PROFILE_KIND, {"config": checked}, digest, idempotency_key, trace, source))


def create_query_job(
    session: Session,
    storage: Storage,
    *,
    capacity_gb: list[float | str],
    replay_id: str | None = None,
    facts_path: str | None = None,
    targets: list[float] | None = None,
    idempotency_key: str | None = None,
    source: str = "api",
) -> tuple[Job, bool]:
    """Stores a queued query job over a replay's facts (or a facts file in the storage root)."""
    body = {"replay_id": replay_id, "facts_path": facts_path, "capacity_gb": capacity_gb, "targets": targets}
    digest = request_hash(body)
    existing = _existing(session, "query", idempotency_key, digest)
    if existing is not None:
        return existing, False
    try:
        slots = parse_capacities([str(c) for c in capacity_gb])
    except QueryError as exc:
        raise ConfigError([ConfigIssue("capacity_gb", capacity_gb, str(exc))]) from None
    for i, t in enumerate(targets or []):
        if not 0 < t <= 1:
            raise ConfigError([ConfigIssue(f"targets[{i}]", t, "target fractions must be in (0, 1]")])
    if (replay_id is None) == (facts_path is None):
        raise ConfigError([ConfigIssue("replay_id", replay_id, "give exactly one of replay_id and facts_path")])
    parent: Job | None = None
    if replay_id is not None:
        parent = session.get(Job, replay_id)
        if parent is None or parent.kind != "replay":
            raise ConfigError([ConfigIssue("replay_id", replay_id, "no replay job with this id")])
        relative = None
    else:
        try:
            relative = storage.relative(storage.user_path(facts_path or ""))
        except StorageError as exc:
            raise ConfigError([ConfigIssue("facts_path", facts_path, str(exc))]) from None
    spec = {
        "capacity_gb": [s.recorded_gb for s in slots],
        "targets": targets or list(DEFAULT_TARGETS),
        "facts_path": relative,
    }
    if parent is not None and assumed_kv_note(parent.spec):
        spec[KV_BYTES_ASSUMED] = True  # its replay's note carries over to the query's outputs
    job = Job(
        kind="query",
        spec=spec,
        parent_id=parent.id if parent else None,
        idempotency_key=idempotency_key or None,
        request_hash=digest,
        source=source,
        stats={},
        progress={},
    )
    return _store(session, job)
