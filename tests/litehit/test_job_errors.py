"""Job errors as users read them: a full or read-only storage says so in one line, and no error
shows where the server keeps its files (paths are relative to the storage root). The job
functions run in process on an embedded database, with the failure injected at the publisher."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import instance

from litehit.db.migrate import upgrade
from litehit.db.models import Job
from litehit.db.session import session_scope
from litehit.db.states import JobState
from litehit.jobs.replay import KIND as REPLAY
from litehit.jobs.stages import stage_functions
from litehit.jobs.state import error_text
from litehit.jobs.submit import create_trace_job
from litehit.settings import Settings
from litehit.storage import Storage

CONFIG = {
    "block_size": 512,
    "instance_groups": [{"name": "g"}],
    "instances": [instance("b512", 512, group="g", sizes=(1 << 20,))],
}


@pytest.fixture
def local(tmp_path: Path, data_dir: Path) -> Settings:
    url = f"sqlite:///{tmp_path / 'litehit.db'}"
    upgrade(url)
    settings = Settings(home=tmp_path, storage_root=tmp_path / "storage", database_url=url)
    Storage(settings.storage).ensure()
    trace = settings.storage / "traces" / "small.jsonl"
    trace.parent.mkdir(parents=True)
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:200]
    trace.write_bytes(b"".join(lines))
    return settings


def run_job(settings: Settings) -> Job:
    """Submits a replay and runs its tasks in process, in order, until none is left."""
    storage = Storage(settings.storage)
    with session_scope(settings.db_url) as session:
        job, _ = create_trace_job(REPLAY, session, storage, {**CONFIG, "trace_file_path": "traces/small.jsonl"})
    tasks: list[tuple[Any, ...]] = [(REPLAY.first_task, job.id)]
    run: dict[str, Callable[..., str]] = stage_functions()

    def enqueue(task: str, *args: Any) -> None:
        tasks.append((task, *args))

    while tasks:
        name, *args = tasks.pop(0)
        with session_scope(settings.db_url) as session:
            run[name](session, settings, enqueue, *args)
    with session_scope(settings.db_url) as session:
        done = session.get(Job, job.id)
        assert done is not None
        return done


def assert_user_facing(error: str | None, settings: Settings) -> str:
    assert error is not None
    assert str(settings.storage) not in error and str(settings.home) not in error, error
    assert "\n" not in error and "internal error" not in error, error
    return error


def test_the_job_runs_when_nothing_fails(local: Settings) -> None:
    job = run_job(local)
    assert job.state == JobState.SUCCEEDED, job.error


def test_a_full_storage_when_the_facts_are_published(local: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up while the facts are written: the data reach the disk at fsync."""

    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("litehit_facts.csv.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr("litehit.publish.os.fsync", full)
    job = run_job(local)
    assert job.state == JobState.FAILED
    error = assert_user_facing(job.error, local)
    assert error == f"cannot write jobs/{job.id}/out/litehit_facts.csv.tmp: the storage is full"
    assert not (local.storage / "jobs" / job.id / "out" / "litehit_facts.csv").exists()


def test_a_read_only_storage_when_the_facts_are_published(local: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(".tmp") and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("litehit.publish.os.open", read_only)
    job = run_job(local)
    assert job.state == JobState.FAILED
    error = assert_user_facing(job.error, local)
    assert error == f"cannot create jobs/{job.id}/out/litehit_facts.csv.tmp: the storage is read-only"


def test_a_write_cut_short_by_a_full_disk_in_a_lane(local: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy reports a short write without an errno ("24062 requested and 8141 written"): it
    reads as a full storage, not as an internal error."""
    import numpy as np

    import litehit.jobs.stored as stored

    real = np.lib.format.write_array
    in_lane = stored.run_stored_unit

    def cut_short(*args: Any, **kwargs: Any) -> Any:
        def short(*a: Any, **k: Any) -> None:
            raise OSError("24062 requested and 8141 written")

        monkeypatch.setattr(np.lib.format, "write_array", short)
        try:
            return in_lane(*args, **kwargs)
        finally:
            monkeypatch.setattr(np.lib.format, "write_array", real)

    monkeypatch.setattr(stored, "run_stored_unit", cut_short)
    job = run_job(local)
    assert job.state == JobState.FAILED
    error = assert_user_facing(job.error, local)
    assert error == f"lane b512: cannot write jobs/{job.id}/work/part-0.out: the storage is full"


def test_internal_errors_show_storage_paths_relative_to_the_root(tmp_path: Path) -> None:
    root = (tmp_path / "storage").resolve()
    missing = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(root / "jobs" / "j1" / "work" / "rows"))
    assert error_text(missing, root) == (
        "internal error: FileNotFoundError: [Errno 2] No such file or directory: 'jobs/j1/work/rows'"
    )
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root / "jobs" / "j1" / "work" / "lane-0.npy"))
    assert error_text(full, root) == "cannot write jobs/j1/work/lane-0.npy: the storage is full"
    assert error_text(OSError(errno.EDQUOT, "Disk quota exceeded"), root) == "the storage quota is used up"
    assert error_text(OSError(errno.EROFS, "Read-only file system"), root) == "the storage is read-only"
    # A path that merely starts like the root is not inside it.
    beside = f"{root}-old/x"
    assert error_text(ValueError(beside), root) == f"internal error: ValueError: {beside}"


@pytest.mark.parametrize(
    ("code", "reason"), [(errno.ENOSPC, "the storage is full"), (errno.EROFS, "the storage is read-only")]
)
def test_an_upload_to_a_full_or_read_only_storage_answers_503(
    local: Settings, monkeypatch: pytest.MonkeyPatch, code: int, reason: str
) -> None:
    """Before: a plain-text 500 ("Internal Server Error"); now the error shape, the reason and
    no path."""
    from fastapi.testclient import TestClient

    from api.main import create_app

    def failing_write(self: Any, data: bytes) -> None:
        raise OSError(code, os.strerror(code), str(self.tmp))

    monkeypatch.setattr("api.routes.traces._Upload.write", failing_write)
    with TestClient(create_app(local, enqueue=lambda *a: None)) as client:
        r = client.post("/v1/traces?name=t.jsonl", content=b'{"timestamp": 0, "hash_ids": [1]}\n' * 10)
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text
    assert r.json() == {
        "error": {"code": "service_unavailable", "message": f"{reason}; nothing was stored, retry later", "details": []}
    }
    assert list((local.storage / "uploads").glob("*/*")) == []  # the unfinished upload was removed
