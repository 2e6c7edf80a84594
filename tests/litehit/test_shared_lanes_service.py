"""The service runs a unit of lanes that differ only in TTL in one task: the parse stage sends the
unit's first lane, whose task takes the others along while they wait (one lane core for all); a
later lane's own task defers to it, or runs alone when that lane is over (as the recovery sends
it). Every way publishes the bytes the CLI publishes, each lane row holding its own counts. The
stage functions run in process on an embedded database, tasks in the order they were sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from sqlalchemy import select, update

from litehit.db.migrate import upgrade
from litehit.db.models import Job, JobPart
from litehit.db.session import session_scope
from litehit.db.states import JobState, LaneState, Stage
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.jobs.replay import KIND as REPLAY
from litehit.jobs.stages import stage_functions
from litehit.jobs.state import UNIT_DONE, claim_part, parts_done
from litehit.jobs.submit import create_trace_job
from litehit.replay.lanes import SharedLanes
from litehit.settings import Settings
from litehit.spec import parse_replay_spec
from litehit.storage import Storage

CONFIG = {
    "block_size": 512,
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}, {"name": "t5", "ttl_seconds": 5}],
    "instances": [
        instance("b512", 512, group="g", sizes=(1 << 20,)),
        instance("b1024", 1024, group="g", sizes=(1 << 20,)),
        instance("b512_ttl60", 512, group="t60", sizes=(1 << 20,)),
        instance("b512_ttl5", 512, group="t5", sizes=(1 << 20,)),
    ],
}


@pytest.fixture
def local(tmp_path: Path, data_dir: Path) -> Settings:
    url = f"sqlite:///{tmp_path / 'litehit.db'}"
    upgrade(url)
    settings = Settings(home=tmp_path, storage_root=tmp_path / "storage", database_url=url, stale_after_s=30.0)
    Storage(settings.storage).ensure()
    trace = settings.storage / "traces" / "small.jsonl"
    trace.parent.mkdir(parents=True)
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:400]
    trace.write_bytes(b"".join(lines))
    return settings


class Service:
    """A replay job and its queue of tasks, run one at a time; what each task answered."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        with session_scope(settings.db_url) as session:
            job, _ = create_trace_job(
                REPLAY, session, Storage(settings.storage), {**CONFIG, "trace_file_path": "traces/small.jsonl"}
            )
        self.job_id = job.id
        self.queue: list[tuple[Any, ...]] = [(REPLAY.first_task, job.id)]
        self.answers: list[tuple[tuple[Any, ...], str]] = []
        self.run: dict[str, Callable[..., str]] = stage_functions()

    def step(self) -> tuple[tuple[Any, ...], str]:
        task = self.queue.pop(0)
        name, *args = task
        with session_scope(self.settings.db_url) as session:
            answer = self.run[name](session, self.settings, lambda *sent: self.queue.append(sent), *args)
        self.answers.append((task, answer))
        return task, answer

    def drain(self) -> None:
        while self.queue:
            self.step()

    def parts(self) -> list[JobPart]:
        with session_scope(self.settings.db_url) as session:
            return list(session.scalars(select(JobPart).where(JobPart.job_id == self.job_id).order_by(JobPart.part)))

    def job(self) -> Job:
        with session_scope(self.settings.db_url) as session:
            job = session.get(Job, self.job_id)
            assert job is not None
            return job

    def facts(self) -> bytes:
        return (Storage(self.settings.storage).out_dir(self.job_id) / FACTS_FILE).read_bytes()


def _cli(settings: Settings, tmp_path: Path) -> tuple[bytes, dict[str, Any]]:
    """The facts and each lane's counts of the same replay in process."""
    out = tmp_path / "cli"
    out.mkdir()
    config = {**CONFIG, "trace_file_path": str(settings.storage / "traces" / "small.jsonl")}
    result = run_replay(parse_replay_spec({**config, "output_result_path": str(out)}))
    lanes = {
        lane.instance_id: (lane.requests, lane.blocks, lane.unique_blocks, lane.expired_blocks) for lane in result.lanes
    }
    return (out / FACTS_FILE).read_bytes(), lanes


def _counts(row: JobPart) -> tuple[int, ...]:
    r = row.result or {}
    return (r["requests"], r["blocks"], r["unique_blocks"], r["expired_blocks"])


def test_the_first_lane_of_a_unit_takes_the_others_along(local: Settings, tmp_path: Path) -> None:
    service = Service(local)
    service.step()  # parse: one task per unit, its first lane's
    assert service.queue == [(REPLAY.part_task_name, service.job_id, 0), (REPLAY.part_task_name, service.job_id, 1)]
    service.drain()
    assert service.answers[1][1] == f"{UNIT_DONE} 2 3"
    assert parts_done(service.answers[1][1], 0) == [0, 2, 3]
    assert service.answers[2][1] == "succeeded"  # b1024 has a core of its own
    assert service.job().state == JobState.SUCCEEDED
    want, lanes = _cli(local, tmp_path)
    assert service.facts() == want
    rows = service.parts()
    assert [row.state for row in rows] == [LaneState.SUCCEEDED] * 4
    assert [row.attempts for row in rows] == [1] * 4
    assert {row.label: _counts(row) for row in rows} == lanes
    assert lanes["b512_ttl5"][3] > 0  # its TTL expired blocks the others kept
    shared = {row.label: (row.result or {})["shares_core_with"] for row in rows}
    assert shared == {"b512": None, "b1024": None, "b512_ttl60": "b512", "b512_ttl5": "b512"}
    assert [(row.result or {})["memory_bytes"] > 0 for row in rows] == [True, True, False, False]


def test_a_later_lane_defers_to_its_units_first_and_runs_alone_once_that_one_is_over(
    local: Settings, tmp_path: Path
) -> None:
    """Lane 2's own task (the recovery's) defers while lane 0 waits. Lane 3, held by another
    worker when lane 0 starts, is not taken along; once its holder went silent and lane 0 is
    over, its task runs it alone. The bytes are the same."""
    service = Service(local)
    service.step()
    service.queue.insert(0, (REPLAY.part_task_name, service.job_id, 2))
    assert service.step()[1] == "deferred"
    assert service.parts()[2].state == LaneState.QUEUED
    with session_scope(local.db_url) as session:  # another worker holds lane 3
        assert (
            claim_part(session, service.job_id, 3, Stage.LANES, local.stale_after_s, local.task_max_attempts)
            == "claimed"
        )
    service.drain()
    assert [answer for _, answer in service.answers[2:]] == [f"{UNIT_DONE} 2", "succeeded"]
    assert service.parts()[3].state == LaneState.RUNNING
    with session_scope(local.db_url) as session:  # its holder went silent
        row = session.get(JobPart, (service.job_id, 3))
        assert row is not None and row.started_at is not None
        session.execute(
            update(JobPart)
            .where(JobPart.job_id == service.job_id, JobPart.part == 3)
            .values(heartbeat_at=row.started_at - timedelta(seconds=2 * local.stale_after_s))
        )
    service.queue.append((REPLAY.part_task_name, service.job_id, 3))
    service.drain()
    assert [answer for _, answer in service.answers[4:6]] == ["succeeded", "succeeded"]  # lane 3 alone, the merge
    assert service.job().state == JobState.SUCCEEDED
    want, lanes = _cli(local, tmp_path)
    assert service.facts() == want
    assert {row.label: _counts(row) for row in service.parts()} == lanes


def test_a_unit_that_fails_fails_every_lane_it_took_along(local: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self: SharedLanes, work: Any) -> Any:
        raise MemoryError("the shared core ran out of memory")

    monkeypatch.setattr(SharedLanes, "run", failing)
    service = Service(local)
    service.drain()
    job = service.job()
    assert job.state == JobState.FAILED
    assert job.error is not None and job.error.startswith("lane b512: ") and "ran out of memory" in job.error
    rows = service.parts()
    assert [rows[k].state for k in (0, 2, 3)] == [LaneState.FAILED] * 3
    assert all("ran out of memory" in (rows[k].error or "") for k in (0, 2, 3))
    assert not (Storage(local.storage).out_dir(service.job_id) / FACTS_FILE).exists()
