"""Workload-profile jobs of the service: parse once -> one task per lane, each replaying the lane at
infinite capacity with its TTL and recording its profile, spread over every worker -> merge into
profile.json, its plots and the summary rows (lane x category) in SQL.

The job's spec is ``{"config": <replay config>}``; each lane is a ProfileLane row that holds the
lane's entry of profile.json once done, so the merge reads SQL and writes the same document as
``litehit profile -o``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, object_session

from litehit.db.models import Job, ProfileLane, ProfileRow, utcnow
from litehit.db.states import LaneState, Stage
from litehit.errors import ReplayCancelled
from litehit.profile.plot import plot_profile
from litehit.profile.result import LaneProfile, Metrics, ProfileResult
from litehit.profile.runs import ProfileRun
from litehit.replay.plan import make_plan
from litehit.replay.staged import iter_lane_work, read_manifest
from litehit.settings import Settings
from litehit.spec import ReplaySpec, TraceFormat
from litehit.storage import PROFILE_PLOT_DIR, PROFILE_RESULT_FILE, Storage
from worker.jobs.merge_task import Merged, run_publish_merge
from worker.jobs.parse import parse_job_trace, runtime_spec
from worker.jobs.part_task import run_part
from worker.jobs.state import heartbeat_part, job_should_stop
from worker.jobs.submit import PROFILE_LANE_TASK, PROFILE_MERGE_TASK, Enqueue
from worker.jobs.throttle import Throttle

__all__ = ["profile_rows", "run_profile_lane", "run_profile_merge", "run_profile_parse"]


def _spec(job: Job, storage: Storage) -> ReplaySpec:
    return runtime_spec(job.spec["config"], job.id, storage)


def run_profile_parse(session: Session, settings: Settings, job_id: str, enqueue: Enqueue) -> str:
    """Stage 1: parse the trace once; then one task per lane."""
    parsed = parse_job_trace(session, settings, job_id, _spec)
    if isinstance(parsed, str):
        return parsed
    job, spec = parsed.job, parsed.spec
    plan = make_plan(spec, TraceFormat(parsed.manifest.trace_format))
    session.execute(delete(ProfileLane).where(ProfileLane.job_id == job_id))
    for i, lane in enumerate(plan.lanes):
        session.add(ProfileLane(job_id=job_id, lane=i, instance_id=lane.instance_id, state=LaneState.QUEUED, result={}))
    job.stage = Stage.PROFILE
    job.heartbeat_at = utcnow()
    job.progress = {"stage": Stage.PROFILE, "lanes": len(plan.lanes)}
    session.commit()
    for i in range(len(plan.lanes)):
        enqueue(PROFILE_LANE_TASK, job_id, i)
    return "parsed"


def _profile_lane(
    session: Session, storage: Storage, job: Job, index: int, attempt: int, heartbeat_s: float
) -> LaneProfile:
    """Replays and profiles one lane from the parsed trace."""
    spec = runtime_spec(job.spec["config"], job.id, storage)
    work = storage.work_dir(job.id)
    manifest = read_manifest(work)
    fmt = TraceFormat(manifest.trace_format)
    plan = make_plan(spec, fmt)
    for name in manifest.categories:
        plan.categories.id_of(name)
    throttle, stop_throttle = Throttle(heartbeat_s), Throttle(heartbeat_s)
    run = ProfileRun(plan.lanes[index], fmt)
    requests = 0
    try:
        for chunk in iter_lane_work(work, index, manifest.chunks):
            if stop_throttle.due() and job_should_stop(session, job.id):
                raise ReplayCancelled("profile cancelled; nothing published")
            run.feed(chunk)
            requests += chunk.requests
            if throttle.due():
                heartbeat_part(session, ProfileLane, job.id, index, attempt, requests=requests)
        return run.result(plan.categories.names)
    finally:
        run.close()


def run_profile_lane(session: Session, settings: Settings, job_id: str, index: int, enqueue: Enqueue) -> str:
    """Stage 2 (one per lane, in parallel): the lane's profile."""
    return run_part(
        session,
        settings,
        ProfileLane,
        job_id,
        index,
        enqueue,
        PROFILE_MERGE_TASK,
        noun="lane",
        describe=lambda row: f"lane {row.instance_id}",
        work=lambda job, row, attempt: _lane_values(
            _profile_lane(session, Storage(settings.storage), job, index, attempt, settings.heartbeat_s)
        ),
    )


def _lane_values(lane: LaneProfile) -> dict[str, Any]:
    return {"requests": lane.overall.requests, "result": lane.model_dump(mode="json")}


def _row(job_id: str, lane: int, row: int, instance_id: str, category: str | None, m: Metrics) -> ProfileRow:
    r, life = m.reuse_time, m.lifespan
    return ProfileRow(
        job_id=job_id,
        lane=lane,
        row=row,
        instance_id=instance_id,
        category=category,
        requests=m.requests,
        input_tokens=m.input_tokens,
        hit_tokens=m.hit_tokens,
        ideal_hit_ratio=m.ideal_hit_ratio,
        hit_token_share=m.hit_token_share,
        reuses=r.count,
        reuse_p50_s=r.p50_s,
        reuse_p90_s=r.p90_s,
        reuse_p99_s=r.p99_s,
        exp_rate_per_s=r.exp_rate_per_s,
        ks=r.ks,
        keys=life.keys,
        lifespan_p50_s=life.p50_s,
        never_reused_share=life.never_reused_share,
        keys_for_90=m.skew.keys_for_90,
        requests_for_90=m.skew.requests_for_90,
    )


def profile_rows(job_id: str, result: ProfileResult) -> list[ProfileRow]:
    """The summary rows: per lane, the lane (category NULL) then its categories."""
    rows = []
    for i, lane in enumerate(result.lanes):
        rows.append(_row(job_id, i, 0, lane.lane, None, lane.overall))
        for k, (name, m) in enumerate(lane.categories.items(), start=1):
            rows.append(_row(job_id, i, k, lane.lane, name, m))
    return rows


def run_profile_merge(session: Session, settings: Settings, job_id: str) -> str:
    """Stage 3: profile.json, its plots and the summary rows, published atomically."""
    return run_publish_merge(session, settings, job_id, PROFILE_RESULT_FILE, PROFILE_PLOT_DIR, _merge_profile)


def _merge_profile(job: Job, storage: Storage) -> Merged:
    session = object_session(job)
    assert session is not None
    query = select(ProfileLane).where(ProfileLane.job_id == job.id).order_by(ProfileLane.lane)
    lanes = [LaneProfile.model_validate(row.result) for row in session.scalars(query)]
    manifest = read_manifest(storage.work_dir(job.id))
    result = ProfileResult(trace_format=manifest.trace_format, lanes=lanes)
    session.execute(delete(ProfileRow).where(ProfileRow.job_id == job.id))
    session.add_all(profile_rows(job.id, result))
    stats = {"lanes": len(lanes)}
    return Merged(result.json_bytes(), lambda path: plot_profile(result, path), stats)
