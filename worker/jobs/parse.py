"""The parse stage every trace job starts with (replays, policy sweeps): claim it, scan,
validate, route and normalize the trace once into the job's work folder, with heartbeats and
cancellation; what follows the parse is the caller's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from litehit.db.models import Job
from litehit.db.states import Stage
from litehit.replay.chunks import Progress
from litehit.replay.staged import ParseManifest, parse_stage
from litehit.settings import Settings
from litehit.spec import ReplaySpec, parse_replay_spec
from litehit.storage import Storage
from worker.errors import TRANSIENT
from worker.jobs.state import claim_job_stage, fail_job_from, heartbeat_job, job_should_stop
from worker.jobs.throttle import Throttle

__all__ = ["Parsed", "parse_job_trace", "runtime_spec"]


def runtime_spec(config: dict[str, Any], job_id: str, storage: Storage) -> ReplaySpec:
    """A job's replay config with its paths resolved inside the storage root."""
    data = dict(config)
    data["trace_file_path"] = str(storage.absolute(data["trace_file_path"]))
    data["output_result_path"] = str(storage.out_dir(job_id))
    return parse_replay_spec(data)


@dataclass(frozen=True)
class Parsed:
    job: Job
    spec: ReplaySpec
    manifest: ParseManifest


def parse_job_trace(
    session: Session, settings: Settings, job_id: str, spec_of: Callable[[Job, Storage], ReplaySpec]
) -> Parsed | str:
    """The parsed trace of the job, or why not: "skipped" (another worker holds the stage or the
    job is over) or "failed" (the job was ended with the reason)."""
    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.QUEUED, Stage.PARSE), Stage.PARSE, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    throttle, stop_throttle = Throttle(settings.heartbeat_s), Throttle(settings.heartbeat_s)

    def progress(p: Progress) -> None:
        if throttle.due():
            heartbeat_job(
                session,
                job_id,
                progress={
                    "stage": Stage.PARSE,
                    "lines": p.lines,
                    "reads": p.reads,
                    "blocks": p.blocks,
                    "bytes_read": p.bytes_read,
                    "bytes_total": p.bytes_total,
                },
            )

    def should_stop() -> bool:
        return stop_throttle.due() and job_should_stop(session, job_id)

    try:
        spec = spec_of(job, storage)
        work = storage.work_dir(job_id)
        storage.remove_work(job_id)
        manifest = parse_stage(spec, work, on_progress=progress, should_stop=should_stop)
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
    return Parsed(job, spec, manifest)
