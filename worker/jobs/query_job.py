"""Query jobs: project published facts at capacities, store one summary row per (instance,
capacity slot) plus the totals (one per lane setup of the replay: litehit.setups) in SQL, and write the per-request JSONL, the exact curve and a
plot to storage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from litehit.curve import exact_curves
from litehit.db.models import Job, utcnow
from litehit.db.states import JobState, Stage
from litehit.db.summaries import record_summaries
from litehit.errors import QueryError
from litehit.plots import plot_facts
from litehit.publish import AtomicPublisher
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings
from litehit.setups import SetupTotal, replay_setups, setup_totals
from litehit.storage import CURVE_FILE, REQUESTS_FILE, Storage
from worker.errors import TRANSIENT
from worker.jobs.state import claim_job_stage, error_text, fail_job

__all__ = ["run_query"]


def facts_of(session: Session, storage: Storage, job: Job) -> Path:
    if job.spec.get("facts_path"):
        return storage.absolute(job.spec["facts_path"])
    parent = session.get(Job, job.parent_id) if job.parent_id else None
    if parent is None or parent.state != JobState.SUCCEEDED or not parent.output_path:
        state = parent.state if parent else "missing"
        raise QueryError(f"the replay {job.parent_id} has no published facts (it is {state})")
    return storage.absolute(parent.output_path)


def run_query(session: Session, settings: Settings, job_id: str) -> str:
    storage = Storage(settings.storage)
    if not claim_job_stage(session, job_id, (Stage.QUEUED, Stage.QUERY), Stage.QUERY, settings.stale_after_s):
        return "skipped"
    job = session.get(Job, job_id)
    assert job is not None
    out = storage.query_dir(job_id)
    try:
        facts = facts_of(session, storage, job)
        out.mkdir(parents=True, exist_ok=True)
        slots = parse_capacities([str(c) for c in job.spec["capacity_gb"]])
        with AtomicPublisher(out / REQUESTS_FILE) as pub:
            result = query_facts(facts, slots, pub)
            pub.commit()
        curves = exact_curves(facts, job.spec["targets"])
        with AtomicPublisher(out / CURVE_FILE) as pub:
            pub.write(json.dumps({"instances": [c.as_dict() for c in curves]}).encode())
            pub.commit()
        plot_facts(
            facts, out, capacities=[s for s in slots if not s.infinite], targets=job.spec["targets"], formats=("png",)
        )
    except TRANSIENT:
        raise
    except Exception as exc:
        fail_job(session, job_id, error_text(exc, storage.root))
        return "failed"
    totals = setup_totals(result, _setups_of(session, job))
    record_summaries(session, job_id, result, totals)
    job = session.get(Job, job_id)
    assert job is not None
    job.stats = {
        "rows": result.rows,
        "instances": len(result.instances),
        "targets": _targets(curves),
        "setups": _setup_stats(totals),
    }
    job.output_path = storage.relative(out)
    job.state, job.stage, job.finished_at = JobState.SUCCEEDED, Stage.DONE, utcnow()
    session.commit()
    return "succeeded"


def _setups_of(session: Session, job: Job) -> dict[str, Any]:
    """The lane setups of the query's replay (none for a facts file without its replay)."""
    parent = session.get(Job, job.parent_id) if job.parent_id else None
    return replay_setups(parent.spec) if parent is not None and isinstance(parent.spec, dict) else {}


def _setup_stats(totals: list[SetupTotal]) -> list[dict[str, Any]]:
    """What the API shows of each total: its key in the summary rows ("" for a single setup), the
    setup and its lanes."""
    return [
        {"key": t.setup.key if len(totals) > 1 else "", **t.setup.as_dict(), "instances": t.instances} for t in totals
    ]


def _targets(curves: list[Any]) -> dict[str, Any]:
    return {
        c.instance_id: {
            "infinite_hit_rate": c.plateau.hit_rate,
            "capacity_gib_for": {str(f): c.point(i).capacity_gib for f, i in sorted(c.targets.items())},
        }
        for c in curves
    }
