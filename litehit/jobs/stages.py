"""The stages of a job in the service, as plain functions: each takes ids, claims its work in SQL,
does it, and records the outcome on the rows (litehit.jobs.state), so a duplicated or redelivered
message is harmless. A kind over a trace goes parse -> one task per part -> merge; a query runs
in one task. The Celery tasks (worker.tasks) only call these; tests call them directly with an
enqueue of their own.

Every stage function has the signature ``(session, settings, enqueue, job_id, *args) -> str``
and returns what happened ("parsed", "succeeded", "failed", "skipped", a claim's answer, ...).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from litehit.db.models import Job, JobPart, utcnow
from litehit.db.states import LaneState, Stage
from litehit.errors import ReplayCancelled
from litehit.jobs.base import JobKind, PartPlan, TraceKind
from litehit.jobs.errors import TRANSIENT
from litehit.jobs.facts_kind import FactsKind
from litehit.jobs.registry import kinds
from litehit.jobs.state import (
    UNIT_DONE,
    PartClaim,
    claim_job_stage,
    claim_part,
    claimed_attempt,
    end_cancelled,
    error_text,
    fail_job,
    fail_job_from,
    finish_part,
    heartbeat_job,
    heartbeat_part,
    job_should_stop,
    part_pending,
    succeed_job,
    try_start_merge,
)
from litehit.jobs.submit import Enqueue
from litehit.jobs.throttle import Throttle
from litehit.replay.chunks import Progress
from litehit.settings import Settings
from litehit.spec import ReplaySpec
from litehit.storage import Storage

__all__ = [
    "StageFunction",
    "run_claimed_part",
    "run_merge",
    "run_parse",
    "run_part",
    "run_single",
    "stage_functions",
]

StageFunction = Callable[..., str]
"""(session, settings, enqueue, job_id, *args) -> what happened."""


def runtime_spec(kind: TraceKind[Any], spec: Any, job_id: str, storage: Storage) -> ReplaySpec:
    """A job's replay config with its paths resolved: its trace inside the storage root, its
    output folder under the job."""
    runtime: ReplaySpec = spec.replay_spec(
        str(storage.absolute(spec.config["trace_file_path"])), str(storage.out_dir(job_id))
    )
    return runtime


def _replace_summaries(session: Session, kind: JobKind[Any], job_id: str, rows: list[Any]) -> None:
    if kind.summary_table is not None:
        session.execute(delete(kind.summary_table).where(kind.summary_table.job_id == job_id))  # type: ignore[attr-defined]
    session.add_all(rows)


def run_parse(kind: TraceKind[Any], session: Session, settings: Settings, enqueue: Enqueue, job_id: str) -> str:
    """Stage 1: scan, validate, route and normalize the trace once into the job's work folder;
    then one task per unit of parts (kind.part_units). "skipped" when another worker holds the
    stage or the job is over, "failed" when the job was ended with the reason."""
    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.QUEUED, Stage.PARSE), Stage.PARSE, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    throttle, stop_throttle = Throttle(settings.heartbeat_s), Throttle(settings.heartbeat_s)

    def progress(p: Progress) -> None:
        if throttle.due():
            values = {"lines": p.lines, "reads": p.reads, "blocks": p.blocks}
            totals = {"bytes_read": p.bytes_read, "bytes_total": p.bytes_total}
            heartbeat_job(session, job_id, progress={"stage": Stage.PARSE, **values, **totals})

    def should_stop() -> bool:
        return stop_throttle.due() and job_should_stop(session, job_id)

    from litehit.replay.staged import parse_stage, stored_plan

    try:
        spec = kind.spec_model.model_validate(job.spec)
        runtime = runtime_spec(kind, spec, job_id, storage)
        kind.check(runtime)
        storage.remove_work(job_id)
        manifest = parse_stage(runtime, storage.work_dir(job_id), on_progress=progress, should_stop=should_stop)
        plan = stored_plan(runtime, manifest)
        parts = kind.parts(spec, plan)
        units = kind.part_units(plan, parts)
    except TRANSIENT:
        raise
    except Exception as exc:  # every failure ends the job with its reason
        fail_job_from(session, storage, job_id, exc)
        return "failed"
    job = session.get(Job, job_id)
    assert job is not None
    job.stats = {
        "trace_format": manifest.trace_format,
        "lines": manifest.lines,
        "rows": manifest.rows,
        "reads": manifest.reads,
        "blocks": manifest.blocks,
        "parse_seconds": round(manifest.parse_s, 3),
    }
    session.execute(delete(JobPart).where(JobPart.job_id == job_id))
    for i, part in enumerate(parts):
        sized = part.model_copy(
            update={
                "requests_total": manifest.lane_requests[part.lane],
                "blocks_total": manifest.lane_blocks[part.lane],
            }
        )
        session.add(
            JobPart(
                job_id=job_id,
                part=i,
                label=kind.part_label(sized),
                state=LaneState.QUEUED,
                plan=sized.model_dump(mode="json"),
                progress={},
            )
        )
    assert kind.part_stage is not None
    job.stage = kind.part_stage
    job.heartbeat_at = utcnow()
    job.progress = {
        "stage": kind.part_stage,
        "lines": manifest.lines,
        "reads": manifest.reads,
        "blocks": manifest.blocks,
        kind.parts_field: len(parts),
    }
    session.commit()
    for unit in units:  # a unit's first part takes the others along (run_part)
        enqueue(kind.part_task_name, job_id, unit[0])
    return "parsed"


PartWork = Callable[[Job, JobPart, int], dict[str, Any]]
"""(job, the part's row, the claimed attempt) -> the values the succeeded row records."""


def run_claimed_part(
    session: Session,
    settings: Settings,
    enqueue: Enqueue,
    job_id: str,
    index: int,
    *,
    stage: Stage,
    merge_task: str,
    noun: str,
    describe: Callable[[JobPart], str],
    work: PartWork,
) -> str:
    """Runs part `index` of the job in its parallel stage `stage`; returns what happened (a
    claim's answer, "failed", "superseded" when another worker took the part over, "succeeded").
    A failure ends the job with `describe(row)` and the reason; a cancellation ends it cancelled,
    also when this part finds the job cancelled while nobody works on it any more (its workers
    died). The last part to succeed sends the merge."""
    storage = Storage(settings.storage)
    claim = claim_part(session, job_id, index, stage, settings.stale_after_s, settings.task_max_attempts)
    if claim == PartClaim.EXHAUSTED:
        reason = f"{noun} {index}: gave up after {settings.task_max_attempts} attempts (worker lost?)"
        if fail_job(session, job_id, reason):
            storage.remove_work(job_id)
        return claim
    if claim == PartClaim.STOPPED:  # cancelled (or over): end it if its workers are gone
        if end_cancelled(session, job_id, settings.stale_after_s):
            storage.remove_work(job_id)
        return claim
    if claim != PartClaim.CLAIMED:
        return claim
    attempt = claimed_attempt(session, job_id, index)
    job, row = session.get(Job, job_id), session.get(JobPart, (job_id, index))
    assert job is not None and row is not None
    try:
        values = work(job, row, attempt)
    except TRANSIENT:
        raise
    except Exception as exc:
        reason = error_text(exc, storage.root)
        if not finish_part(session, job_id, index, attempt, LaneState.FAILED, error=reason):
            return "superseded"  # another worker took the part over: its outcome counts
        if isinstance(exc, ReplayCancelled):
            fail_job_from(session, storage, job_id, exc)
        elif fail_job(session, job_id, f"{describe(row)}: {reason}"):
            storage.remove_work(job_id)
        return "failed"
    if not finish_part(session, job_id, index, attempt, LaneState.SUCCEEDED, **values):
        return "superseded"
    if try_start_merge(session, job_id, stage):
        enqueue(merge_task, job_id)
    return "succeeded"


def _unit_of(kind: TraceKind[Any], session: Session, storage: Storage, job_id: str, index: int) -> list[int]:
    """Part `index`'s unit (kind.part_units over the job's stored plan), its first part first;
    [index] for a kind whose parts run alone, and when the plan cannot be read (the claim or the
    run then says why)."""
    if not kind.shared_parts:
        return [index]
    from litehit.replay.staged import read_manifest, stored_plan

    try:
        job = session.get(Job, job_id)
        if job is None:
            return [index]
        spec = kind.spec_model.model_validate(job.spec)
        plan = stored_plan(runtime_spec(kind, spec, job_id, storage), read_manifest(storage.work_dir(job_id)))
        rows = session.scalars(select(JobPart.plan).where(JobPart.job_id == job_id).order_by(JobPart.part)).all()
        units = kind.part_units(plan, [kind.plan_model().model_validate(row) for row in rows])
    except TRANSIENT:
        raise
    except Exception:  # (a job over or damaged: alone, the claim says so)
        return [index]
    finally:
        session.rollback()  # end the read transaction
    return next((unit for unit in units if index in unit), [index])


def run_part(
    kind: TraceKind[Any], session: Session, settings: Settings, enqueue: Enqueue, job_id: str, index: int
) -> str:
    """Stage 2 (one per unit of parts, in parallel): the part over its lane's parsed requests, and
    the other parts of its unit (kind.part_units) that still wait, in the same pass. A later part
    of a unit whose first part waits or runs is left to that part ("deferred"); otherwise, as
    when the recovery sends it again, it runs alone."""
    from litehit.jobs.stored import run_stored_unit

    storage = Storage(settings.storage)
    plan_model = kind.plan_model()
    assert kind.part_stage is not None
    stage = kind.part_stage
    unit = _unit_of(kind, session, storage, job_id, index)
    if unit[0] != index:
        if part_pending(session, job_id, unit[0], settings.stale_after_s):
            return "deferred"
        unit = [index]
    taken: list[int] = []

    def work(job: Job, row: JobPart, attempt: int) -> dict[str, Any]:
        throttle, stop_throttle = Throttle(settings.heartbeat_s), Throttle(settings.heartbeat_s)
        done = {"requests": 0, "blocks": 0}
        held = [(index, attempt)]
        others: list[tuple[int, int]] = []

        def progress(requests: int, blocks: int) -> None:
            done.update(requests=requests, blocks=blocks)
            if throttle.due():
                for k, held_attempt in held:
                    heartbeat_part(session, job.id, k, held_attempt, progress=dict(done))

        def should_stop() -> bool:
            return stop_throttle.due() and job_should_stop(session, job.id)

        try:
            for k in unit[1:]:
                claim = claim_part(session, job_id, k, stage, settings.stale_after_s, settings.task_max_attempts)
                if claim == PartClaim.CLAIMED:
                    others.append((k, claimed_attempt(session, job_id, k)))
            held.extend(others)
            plans = [session.get(JobPart, (job_id, k)) for k, _ in held]
            spec = kind.spec_model.model_validate(job.spec)
            outputs = run_stored_unit(
                kind,
                spec,
                runtime_spec(kind, spec, job.id, storage),
                storage.work_dir(job.id),
                [k for k, _ in held],
                [plan_model.model_validate(p.plan if p is not None else {}) for p in plans],
                on_progress=progress,
                should_stop=should_stop,
            )
        except TRANSIENT:
            raise
        except Exception as exc:  # the parts taken along end as this one does
            reason = error_text(exc, storage.root)
            for k, other_attempt in others:
                finish_part(session, job_id, k, other_attempt, LaneState.FAILED, error=reason)
            raise
        for (k, other_attempt), output in zip(others, outputs[1:], strict=True):
            values = {"result": output.result.model_dump(mode="json"), "progress": dict(done)}
            if finish_part(session, job_id, k, other_attempt, LaneState.SUCCEEDED, **values):
                taken.append(k)
        return {"result": outputs[0].result.model_dump(mode="json"), "progress": done}

    outcome = run_claimed_part(
        session,
        settings,
        enqueue,
        job_id,
        index,
        stage=stage,
        merge_task=kind.task("merge"),
        noun=kind.part_noun,
        describe=lambda row: kind.describe(plan_model.model_validate(row.plan)),
        work=work,
    )
    if outcome == "succeeded" and taken:
        return f"{UNIT_DONE} {' '.join(map(str, taken))}"
    return outcome


def run_merge(kind: TraceKind[Any], session: Session, settings: Settings, enqueue: Enqueue, job_id: str) -> str:
    """Stage 3: the kind's merge over every part's output; its result published atomically in
    the job's output folder, its summary rows in SQL; the job ends succeeded. "skipped" when
    another worker holds the merge (or the job ended meanwhile), "failed" with the reason."""
    from litehit.jobs.stored import merge_stored

    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    try:
        spec = kind.spec_model.model_validate(job.spec)
        runtime = runtime_spec(kind, spec, job_id, storage)
        rows = list(session.scalars(select(JobPart).where(JobPart.job_id == job_id).order_by(JobPart.part)))
        plans: list[PartPlan] = [kind.plan_model().model_validate(r.plan) for r in rows]
        out = storage.out_dir(job_id)
        out.mkdir(parents=True, exist_ok=True)
        merged = merge_stored(kind, spec, runtime, storage.work_dir(job_id), plans, [r.result or {} for r in rows])
        output = kind.publish(merged.value, out)
        _replace_summaries(session, kind, job_id, kind.summary_rows(job_id, merged.value, spec))
    except TRANSIENT:
        raise
    except Exception as exc:
        session.rollback()
        fail_job_from(session, storage, job_id, exc)
        return "failed"
    job = session.get(Job, job_id)
    assert job is not None
    stats, progress = {**job.stats, **merged.stats}, {**job.progress, "stage": Stage.DONE}
    if not succeed_job(session, job_id, output_path=storage.relative(output), stats=stats, progress=progress):
        return "skipped"  # it ended while merging (cancelled): its state stays
    storage.remove_work(job_id)
    return "succeeded"


def run_single(kind: FactsKind[Any], session: Session, settings: Settings, enqueue: Enqueue, job_id: str) -> str:
    """A one-task kind over facts (a query, a tier split, a plan): claim, run, record its summary rows, end succeeded."""
    storage = Storage(settings.storage)
    stage = kind.first_stage
    if not claim_job_stage(session, job_id, (Stage.QUEUED, stage), stage, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    try:
        stats, output, rows = kind.run(session, storage, job)
    except TRANSIENT:
        raise
    except Exception as exc:
        session.rollback()
        fail_job(session, job_id, error_text(exc, storage.root))
        return "failed"
    _replace_summaries(session, kind, job_id, rows)
    if not succeed_job(session, job_id, stats=stats, output_path=output):
        return "skipped"
    return "succeeded"


def stage_functions() -> dict[str, StageFunction]:
    """Every task of every kind, by task name: what worker.tasks makes Celery tasks of."""
    out: dict[str, StageFunction] = {}
    for kind in kinds():
        if isinstance(kind, TraceKind):
            out[kind.task("parse")] = functools.partial(run_parse, kind)
            out[kind.part_task_name] = functools.partial(run_part, kind)
            out[kind.task("merge")] = functools.partial(run_merge, kind)
        elif isinstance(kind, FactsKind):
            out[kind.first_task] = functools.partial(run_single, kind)
        else:  # pragma: no cover - a new shape of kind needs its stages here
            raise TypeError(f"no stages for the kind {kind.kind}")
    return out
