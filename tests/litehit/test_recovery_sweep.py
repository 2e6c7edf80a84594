"""The recovery sweep with its clock passed in, on a fresh migrated database (SQLite, and a real
PostgreSQL when reachable): cancelled jobs whose workers died end cancelled, nothing is sent again
on every pass, and Job.attempts counts the claims of the current stage."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from litehit.db.migrate import upgrade
from litehit.db.models import Job, JobPart, utcnow
from litehit.db.session import session_scope
from litehit.db.states import JobState, LaneState, Stage
from litehit.jobs.recovery import sweep
from litehit.jobs.registry import job_kind
from litehit.jobs.stages import run_claimed_part
from litehit.jobs.state import PartClaim, claim_job_stage, succeed_job, try_start_merge
from litehit.settings import Settings

STALE_S = 30.0
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=utcnow().tzinfo)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.service)])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    name = ""
    if request.param == "postgresql":
        from service_fixtures import create_database, drop_database

        name, url = create_database()
    else:
        url = f"sqlite:///{tmp_path / 'sweep.db'}"
    upgrade(url)
    yield Settings(
        home=tmp_path,
        storage_root=tmp_path / "storage",
        database_url=url,
        stale_after_s=STALE_S,
        task_max_attempts=3,
        upload_part_grace_s=3600,
    )
    if name:
        from service_fixtures import drop_database

        from litehit.db.session import get_engine

        get_engine(url).dispose()
        drop_database(name)


def part(kind: str, index: int, state: LaneState, heartbeat: datetime | None, attempts: int = 1) -> JobPart:
    """A part of a job of `kind` (its plan as that kind makes them)."""
    plan: dict[str, Any] = {"lane": index, "instance_id": f"i{index}"}
    if kind == "policy_sweep":
        plan = {
            **plan,
            "lane": 0,
            "run": index,
            "policy": "lru",
            "slot": index,
            "capacity_gb": 1.0,
            "capacity_blocks": 8,
        }
    elif kind == "window":
        plan = {**plan, "capacity_blocks": 8}
    label = job_kind(kind).part_label(job_kind(kind).plan_model().model_validate(plan))  # type: ignore[attr-defined]
    return JobPart(
        part=index, label=label, state=state, heartbeat_at=heartbeat, attempts=attempts, plan=plan, progress={}
    )


PART_JOBS = [
    ("replay", "replay", Stage.LANES),
    ("policy_sweep", "policy_sweep", Stage.SIMULATE),
    ("window", "window", Stage.SIZE),
    ("profile", "profile", Stage.PROFILE),
]


def add_job(settings: Settings, parts: list[Any] = (), **values: Any) -> str:  # type: ignore[assignment]
    with session_scope(settings.db_url) as session:
        job = Job(spec={}, stats={}, progress={}, **{"created_at": T0, **values})
        session.add(job)
        session.flush()
        for row in parts:
            row.job_id = job.id
            session.add(row)
        return job.id


def job_of(settings: Settings, job_id: str) -> Job:
    with session_scope(settings.db_url) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def sweeps(settings: Settings, start: datetime, seconds: int, every: int) -> list[tuple[int, tuple[Any, ...]]]:
    """Runs the sweep every `every` seconds of a simulated clock; (second, message) sent."""
    sent: list[tuple[int, tuple[Any, ...]]] = []
    for t in range(0, seconds + 1, every):
        with session_scope(settings.db_url) as session:
            sweep(session, settings, lambda *a, t=t: sent.append((t, a)), now=start + timedelta(seconds=t))
    return sent


@pytest.mark.parametrize(("model", "kind", "stage"), PART_JOBS)
def test_a_cancelled_job_whose_part_worker_died_ends_cancelled(
    settings: Settings, model: Any, kind: str, stage: Stage
) -> None:
    """The issue's run: a part's worker was SIGKILLed, then the job was cancelled. No claim takes
    a cancelled job, so before the fix nothing ever ended it."""
    now = T0
    dead = add_job(
        settings,
        [
            part(model, 0, LaneState.RUNNING, now - timedelta(seconds=STALE_S + 1)),
            part(model, 1, LaneState.SUCCEEDED, now),
        ],
        kind=kind,
        state=JobState.RUNNING,
        stage=stage,
        cancel_requested=True,
        heartbeat_at=now - timedelta(seconds=600),
    )
    alive = add_job(
        settings,
        [part(model, 0, LaneState.RUNNING, now - timedelta(seconds=2))],
        kind=kind,
        state=JobState.RUNNING,
        stage=stage,
        cancel_requested=True,
        heartbeat_at=now - timedelta(seconds=600),
    )
    never_claimed = add_job(
        settings,
        [part(model, 0, LaneState.QUEUED, None, attempts=0)],
        kind=kind,
        state=JobState.RUNNING,
        stage=stage,
        cancel_requested=True,
        heartbeat_at=now,
    )
    sent: list[tuple[Any, ...]] = []
    with session_scope(settings.db_url) as session:
        actions = sweep(session, settings, lambda *a: sent.append(a), now=now)
    assert f"cancelled {dead}" in actions and f"cancelled {never_claimed}" in actions
    for job_id in (dead, never_claimed):
        job = job_of(settings, job_id)
        assert (job.state, job.stage, job.error) == (JobState.CANCELLED, Stage.DONE, "cancelled; nothing was published")
    # A live worker still holds a part: it notices the cancellation itself; nothing is re-sent.
    assert job_of(settings, alive).state == JobState.RUNNING and sent == []
    with session_scope(settings.db_url) as session:
        sweep(session, settings, lambda *a: sent.append(a), now=now + timedelta(seconds=STALE_S))
    assert job_of(settings, alive).state == JobState.CANCELLED and sent == []


@pytest.mark.parametrize("stage", [Stage.PARSE, Stage.MERGE])
def test_a_cancelled_job_whose_stage_holder_died_ends_cancelled(settings: Settings, stage: Stage) -> None:
    now = T0
    dead = add_job(
        settings,
        kind="replay",
        state=JobState.RUNNING,
        stage=stage,
        cancel_requested=True,
        attempts=1,
        heartbeat_at=now - timedelta(seconds=STALE_S + 1),
    )
    alive = add_job(
        settings,
        kind="replay",
        state=JobState.RUNNING,
        stage=stage,
        cancel_requested=True,
        attempts=1,
        heartbeat_at=now - timedelta(seconds=1),
    )
    sent: list[tuple[Any, ...]] = []
    with session_scope(settings.db_url) as session:
        sweep(session, settings, lambda *a: sent.append(a), now=now)
    assert job_of(settings, dead).state == JobState.CANCELLED
    assert job_of(settings, alive).state == JobState.RUNNING
    assert sent == []  # a cancelled job's stage is never sent again (no claim would take it)


def test_a_redelivered_part_of_a_cancelled_job_ends_it(settings: Settings) -> None:
    """The part task itself ends the job when its claim is refused because of the cancellation
    and nobody works on the job any more (here: its other lane's worker died too)."""
    long_ago = utcnow() - timedelta(seconds=STALE_S * 10)
    job_id = add_job(
        settings,
        [part("replay", 0, LaneState.RUNNING, long_ago), part("replay", 1, LaneState.RUNNING, long_ago)],
        kind="replay",
        state=JobState.RUNNING,
        stage=Stage.LANES,
        cancel_requested=True,
        heartbeat_at=long_ago,
    )
    work = settings.storage / "jobs" / job_id / "work"
    work.mkdir(parents=True)

    def must_not_run(*_: Any) -> dict[str, Any]:
        raise AssertionError("a cancelled job's part was run")

    with session_scope(settings.db_url) as session:
        answer = run_claimed_part(
            session,
            settings,
            lambda *a: None,
            job_id,
            0,
            stage=Stage.LANES,
            merge_task="merge",
            noun="lane",
            describe=str,
            work=must_not_run,
        )
    assert answer == PartClaim.STOPPED
    assert job_of(settings, job_id).state == JobState.CANCELLED
    assert not work.exists()


def test_a_queued_backlog_is_not_flooded_with_copies(settings: Settings) -> None:
    """40 jobs wait 30 minutes behind busy workers (their messages are in the queue) while the
    sweep runs every 10 s. Re-sent every stale period they got one copy each per 30 s (the
    issue's 4,673 messages for ~210 jobs); now each re-send doubles the wait before the next, up
    to RESEND_BACKOFF_CAP stale periods, so a lost message is still found again in time."""
    ids = [add_job(settings, kind="replay", heartbeat_at=T0) for _ in range(40)]
    lost = add_job(settings, kind="query", heartbeat_at=None)  # its enqueue failed: sent once stale
    sent = sweeps(settings, T0, 1800, 10)
    times: dict[str, list[int]] = {}
    for t, message in sent:
        times.setdefault(message[1], []).append(t)
    for job_id in ids:
        assert times[job_id] == [40, 90, 190, 390, 700, 1010, 1320, 1630]
    assert all(m[0] == "litehit.replay.parse" for _, m in sent if m[1] != lost)
    assert times[lost] == [40, 90, 190, 390, 700, 1010, 1320, 1630]
    assert len(sent) == 41 * 8  # re-sent every stale period (every 40 s here): 45 each


def test_lost_parts_are_sent_once_per_stale_period(settings: Settings) -> None:
    """A replay whose lane 0 worker died while lane 1 runs: lane 0 is sent again once per stale
    period while nobody claims it (busy workers), not on every pass."""
    job_id = add_job(
        settings,
        [part("replay", 0, LaneState.RUNNING, T0 - timedelta(seconds=60)), part("replay", 1, LaneState.RUNNING, None)],
        kind="replay",
        state=JobState.RUNNING,
        stage=Stage.LANES,
        heartbeat_at=T0 - timedelta(seconds=60),
    )
    with session_scope(settings.db_url) as session:  # lane 1 heartbeats all along
        session.execute(update(JobPart).where(JobPart.part == 1).values(heartbeat_at=T0 + timedelta(hours=1)))
    sent = sweeps(settings, T0, 120, 10)
    assert sent == [(t, ("litehit.replay.lane", job_id, 0)) for t in (0, 40, 80, 120)]


def test_a_stage_whose_holder_died_is_sent_once_per_stale_period(settings: Settings) -> None:
    job_id = add_job(
        settings,
        kind="replay",
        state=JobState.RUNNING,
        stage=Stage.PARSE,
        attempts=1,
        heartbeat_at=T0 - timedelta(seconds=60),
    )
    sent = sweeps(settings, T0, 120, 10)
    assert sent == [(t, ("litehit.replay.parse", job_id)) for t in (0, 40, 80, 120)]


def test_a_refused_resend_is_tried_again_next_pass(settings: Settings) -> None:
    job_id = add_job(settings, kind="replay", heartbeat_at=None, created_at=T0 - timedelta(seconds=STALE_S + 1))

    def broker_down(*_: Any) -> None:
        raise ConnectionError("broker down")

    with session_scope(settings.db_url) as session:
        assert sweep(session, settings, broker_down, now=T0) == []
    assert job_of(settings, job_id).heartbeat_at is None
    sent: list[tuple[Any, ...]] = []
    with session_scope(settings.db_url) as session:
        sweep(session, settings, lambda *a: sent.append(a), now=T0 + timedelta(seconds=1))
    assert sent == [("litehit.replay.parse", job_id)]


def test_attempts_count_the_claims_of_the_current_stage(settings: Settings) -> None:
    """Issue 13: a clean replay showed attempts 2 (parse + merge added up) while recovery
    compares attempts with the per-stage limit."""
    job_id = add_job(settings, kind="replay")
    with session_scope(settings.db_url) as session:
        assert claim_job_stage(session, job_id, (Stage.QUEUED, Stage.PARSE), Stage.PARSE, STALE_S)
        assert job_of(settings, job_id).attempts == 1
        # The parse's holder died: the stage is taken over, its second attempt.
        session.execute(update(Job).where(Job.id == job_id).values(heartbeat_at=utcnow() - timedelta(hours=1)))
        session.commit()
        assert claim_job_stage(session, job_id, (Stage.QUEUED, Stage.PARSE), Stage.PARSE, STALE_S)
        assert job_of(settings, job_id).attempts == 2
        session.execute(update(Job).where(Job.id == job_id).values(stage=Stage.LANES))
        done = part("replay", 0, LaneState.SUCCEEDED, utcnow())
        done.job_id = job_id
        session.add(done)
        session.commit()
        assert try_start_merge(session, job_id, Stage.LANES)
        assert claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, STALE_S)
    assert job_of(settings, job_id).attempts == 1
    with session_scope(settings.db_url) as session:
        assert session.scalar(select(Job.stage).where(Job.id == job_id)) == Stage.MERGE


def test_a_merge_that_ends_after_its_job_was_cancelled_changes_nothing(settings: Settings) -> None:
    """The sweep ended a cancelled job whose merge went silent; when the merge finishes after
    all, the job stays cancelled (a terminal state is never left)."""
    job_id = add_job(
        settings,
        kind="replay",
        state=JobState.RUNNING,
        stage=Stage.MERGE,
        attempts=1,
        cancel_requested=True,
        heartbeat_at=T0 - timedelta(seconds=STALE_S + 1),
    )
    with session_scope(settings.db_url) as session:
        assert f"cancelled {job_id}" in sweep(session, settings, lambda *a: None, now=T0)
        assert not succeed_job(session, job_id, output_path="jobs/x/out/litehit_facts.csv")
    job = job_of(settings, job_id)
    assert (job.state, job.output_path) == (JobState.CANCELLED, None)


@pytest.mark.parametrize(("model", "kind", "stage"), PART_JOBS)
def test_a_merge_that_never_started_is_started(settings: Settings, model: Any, kind: str, stage: Stage) -> None:
    """The last part's worker died between finishing its part and starting the merge."""
    job_id = add_job(
        settings,
        [part(model, 0, LaneState.SUCCEEDED, T0), part(model, 1, LaneState.SUCCEEDED, T0)],
        kind=kind,
        state=JobState.RUNNING,
        stage=stage,
        attempts=1,
        heartbeat_at=T0 - timedelta(seconds=STALE_S + 1),
    )
    sent = sweeps(settings, T0, 60, 10)
    merge = {"replay": "litehit.replay.merge"}.get(kind, f"litehit.{kind.removeprefix('policy_')}.merge")
    # Started at once; as nobody claims it (no worker here), sent again once per stale period.
    assert sent == [(0, (merge, job_id)), (40, (merge, job_id))]
    job = job_of(settings, job_id)
    assert (job.state, job.stage, job.attempts) == (JobState.RUNNING, Stage.MERGE, 0)
    with session_scope(settings.db_url) as session:
        assert claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, STALE_S)  # free to claim
        assert not claim_job_stage(session, job_id, (Stage.MERGE,), Stage.MERGE, STALE_S)  # now held
        progress = session.scalar(select(Job.progress).where(Job.id == job_id))
        assert set(progress) == {"resent_at"}  # the sweep's note of its re-send at 40 s
        assert succeed_job(session, job_id, output_path="out/x.json", progress={**progress, "stage": "done"})
    job = job_of(settings, job_id)
    assert (job.state, job.stage, job.attempts, job.progress) == (JobState.SUCCEEDED, Stage.DONE, 1, {"stage": "done"})
