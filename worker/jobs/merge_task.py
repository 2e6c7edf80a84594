"""The last stage of an analysis job (policy sweep, window sizing): claim the merge, build the
result from the part rows, publish its JSON and plot atomically, and end the job succeeded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from litehit.db.models import Job
from litehit.db.states import Stage
from litehit.publish import AtomicPublisher
from litehit.settings import Settings
from litehit.storage import Storage
from worker.errors import TRANSIENT
from worker.jobs.state import claim_job_stage, fail_job_from, succeed_job

__all__ = ["Merged", "run_publish_merge"]


@dataclass(frozen=True)
class Merged:
    document: bytes  # the result JSON, byte for byte what the CLI writes
    draw: Callable[[Path], object]  # draws the plot to the given path
    stats: dict[str, Any]  # added to the job's stats


def run_publish_merge(
    session: Session,
    settings: Settings,
    job_id: str,
    result_file: str,
    plot_file: str,
    merge: Callable[[Job, Storage], Merged],
) -> str:
    """Runs the merge of the job; "skipped" when another worker holds it, "failed" (the job ended
    with the reason) or "succeeded"."""
    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    try:
        merged = merge(job, storage)
        out = storage.out_dir(job_id)
        out.mkdir(parents=True, exist_ok=True)
        with AtomicPublisher(out / result_file) as publisher:
            publisher.write(merged.document)
            publisher.commit()
        merged.draw(out / plot_file)
    except TRANSIENT:
        raise
    except Exception as exc:
        fail_job_from(session, storage, job_id, exc)
        return "failed"
    job = session.get(Job, job_id)
    assert job is not None
    stats, progress = {**job.stats, **merged.stats}, {**job.progress, "stage": Stage.DONE}
    output = storage.relative(out / result_file)
    if not succeed_job(session, job_id, output_path=output, stats=stats, progress=progress):
        return "skipped"  # it ended while merging (cancelled): its state stays
    storage.remove_work(job_id)
    return "succeeded"
