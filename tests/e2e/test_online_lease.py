"""The lease of an online shard across owner lifetimes: released at a graceful shutdown (also with
the database gone), a dead owner's lease taken without a crash loop (at once when it was this
host and pid's earlier process, else once it expires), a live holder refused; and the same with
real ``uvicorn api.online:app`` processes on PostgreSQL: SIGTERM releases the lease and a second
owner starts at once, a SIGKILLed owner's lease is taken when it expires."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import group, instance
from service_fixtures import ROOT, free_port, settings_env, wait_for
from sqlalchemy import update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from litehit.db.migrate import upgrade
from litehit.db.models import OnlineShard, host_pid, utcnow
from litehit.db.session import session_scope
from litehit.online.engine import TraceQuery
from litehit.online.owner import ShardOwner
from litehit.online.store import lease_holder, shard_of
from litehit.settings import Settings
from litehit.spec import InstanceGroup, InstanceInfo


class Clock:
    """The owner's clock and sleep: sleeping moves the clock; ``during_sleep`` runs at each nap
    (another process renewing its lease, say)."""

    def __init__(self) -> None:
        self.now = utcnow()
        self.slept = 0.0
        self.during_sleep: Any = None

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.now += timedelta(seconds=seconds)
        if self.during_sleep is not None:
            self.during_sleep()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(home=tmp_path, online_snapshot_s=3600)
    upgrade(s.db_url)
    return s


def holder(settings: Settings) -> tuple[str, datetime] | None:
    with session_scope(settings.db_url) as session:
        return lease_holder(session, 0)


def plant_lease(settings: Settings, owner: str, heartbeat_at: datetime) -> None:
    with session_scope(settings.db_url) as session:
        session.add(OnlineShard(shard=0, owner=owner, heartbeat_at=heartbeat_at))


def test_a_dead_owners_lease_is_taken_when_it_expires(settings: Settings) -> None:
    clock = Clock()
    plant_lease(settings, "elsewhere:7:shard0:0badc0de", clock.now)
    owner = ShardOwner(settings, clock=clock, sleep=clock.sleep, lease_s=15)
    owner.claim()
    assert owner.leased
    assert 15.0 < clock.slept <= 16.0 + 1e-9  # polled once a second until the lease expired
    current = holder(settings)
    assert current is not None and current[0] == owner.name
    owner.release()
    assert holder(settings) is None


def test_the_lease_of_an_earlier_process_with_this_host_and_pid_is_taken_at_once(settings: Settings) -> None:
    clock = Clock()
    plant_lease(settings, f"{host_pid()}:shard0:0badc0de", clock.now)  # a restarted container's pid 1
    owner = ShardOwner(settings, clock=clock, sleep=clock.sleep, lease_s=15)
    owner.claim()
    assert clock.slept == 0.0
    current = holder(settings)
    assert current is not None and current[0] == owner.name
    owner.release()


def test_a_holder_whose_heartbeat_moves_is_alive(settings: Settings) -> None:
    clock = Clock()
    plant_lease(settings, "elsewhere:7:shard0:0badc0de", clock.now)

    def renew_elsewhere() -> None:
        with session_scope(settings.db_url) as session:
            session.execute(update(OnlineShard).values(heartbeat_at=clock.now))

    clock.during_sleep = renew_elsewhere
    owner = ShardOwner(settings, clock=clock, sleep=clock.sleep, lease_s=15)
    with pytest.raises(RuntimeError, match=r"already owned by a live process \(elsewhere:7:shard0:0badc0de\)"):
        owner.claim()
    assert clock.slept == 1.0 and not owner.leased


def test_a_holder_whose_clock_never_expires_is_given_up_on_after_twice_the_lease(settings: Settings) -> None:
    clock = Clock()
    plant_lease(settings, "elsewhere:7:shard0:0badc0de", clock.now + timedelta(hours=1))  # its clock runs ahead
    owner = ShardOwner(settings, clock=clock, sleep=clock.sleep, lease_s=15)
    with pytest.raises(RuntimeError, match="already owned by a live process"):
        owner.claim()
    assert clock.slept == pytest.approx(30.0)


def test_an_owner_alive_in_this_process_is_refused_at_once(settings: Settings) -> None:
    clock = Clock()
    first = ShardOwner(settings, clock=clock, sleep=clock.sleep)
    first.claim()
    with pytest.raises(RuntimeError, match="already owned by a live process"):
        ShardOwner(settings, clock=clock, sleep=clock.sleep).claim()
    assert clock.slept == 0.0
    first.release()
    second = ShardOwner(settings, clock=clock, sleep=clock.sleep)
    second.claim()  # released: free at once
    assert clock.slept == 0.0
    second.release()


class Outage:
    """Sessions of the owner's database that fail while ``down`` is set, like a stopped server."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down = False

    def __call__(self) -> AbstractContextManager[Session]:
        return self._session()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        if self.down:
            raise OperationalError("SELECT 1", {}, Exception("failed to resolve host 'postgres'"))
        with session_scope(self.url) as session:
            yield session


def test_shutdown_without_a_database_still_ends_and_the_next_owner_takes_over(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    sessions = Outage(settings.db_url)
    first = ShardOwner(settings, sessions=sessions, clock=clock, sleep=clock.sleep)
    first.claim()
    first.create_group(InstanceGroup.model_validate(group()))
    first.register(InstanceInfo.model_validate(instance("i1", 4)))
    first.query("i1", [TraceQuery([1, 2], 8)])
    sessions.down = True
    first.release()  # no exception: the shutdown goes on
    assert not first.leased and not first.instances
    messages = [r.getMessage() for r in caplog.records if r.name == "litehit.online"]
    assert any("the last counter snapshot failed" in m for m in messages), messages
    assert any("could not release the lease" in m for m in messages), messages
    sessions.down = False
    left = holder(settings)
    assert left is not None and left[0] == first.name
    second = ShardOwner(settings, clock=clock, sleep=clock.sleep)  # this process again, as after a restart
    second.claim()
    assert clock.slept == 0.0
    second.restore()
    assert second.view(second.instance("i1"))["total_queries"] == 0  # the unsnapshotted query was lost
    second.release()


# Real owner processes on PostgreSQL


class OwnerProcess:
    def __init__(self, settings: Settings, log: Path) -> None:
        self.port = free_port()
        self.log = log
        with log.open("ab") as sink:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "api.online:app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                cwd=ROOT,
                env=settings_env(settings),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.base = f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        try:
            return bool(httpx.get(f"{self.base}/healthz", timeout=2).json()["status"] == "ok")
        except httpx.HTTPError:
            return False

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def stop_gracefully(self) -> None:
        """SIGTERM, as ``docker stop`` sends: uvicorn shuts the app down, then exits by the signal."""
        assert self.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
        text = self.log.read_text()
        assert "Application shutdown complete." in text and "could not release" not in text, text


@pytest.mark.service
def test_real_owners_release_on_sigterm_and_take_a_killed_owners_lease(postgres_url: str, tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path, database_url=postgres_url, online_shards=8, online_shard=7, online_snapshot_s=3600
    )
    lease = partial(_lease_of, settings)
    owners: list[OwnerProcess] = []
    try:
        first = OwnerProcess(settings, tmp_path / "first.log")
        owners.append(first)
        wait_for(first.healthy, 60, "the first owner", interval=0.2)
        assert first.proc.pid == int(lease()[0].split(":")[1])
        gid, iid = f"lease-{first.port}", next(f"l{n}" for n in range(1000) if shard_of(f"l{n}", 8) == 7)
        assert httpx.post(f"{first.base}/v1/online/groups", json=group(gid)).status_code == 201
        assert httpx.post(f"{first.base}/v1/online/instances", json=instance(iid, 4, group=gid)).status_code == 201
        url = f"{first.base}/v1/online/instances/{iid}/trace-queries"
        assert httpx.post(url, json={"block_keys": [1, 2], "input_token_len": 8}).status_code == 200

        first.stop_gracefully()  # the last snapshot, the lease released
        assert lease() is None
        second = OwnerProcess(settings, tmp_path / "second.log")
        owners.append(second)
        wait_for(second.healthy, 60, "the second owner", interval=0.2)
        assert "waiting" not in second.log.read_text()  # at once: no waiting for a lease, no crash loop
        view = httpx.get(f"{second.base}/v1/online/instances/{iid}").json()
        assert view["total_queries"] == 1  # the shutdown snapshot

        assert second.stop(signal.SIGKILL) == -signal.SIGKILL  # dies holding the lease
        held = lease()
        assert held is not None and int(held[0].split(":")[1]) == second.proc.pid
        third = OwnerProcess(settings, tmp_path / "third.log")
        owners.append(third)
        wait_for(third.healthy, 60, "the third owner", interval=0.2)
        assert third.proc.poll() is None  # it waited for the lease instead of exiting
        text = third.log.read_text()
        assert "waiting up to 15 s for its lease to expire" in text
        assert f"took over the lease of online shard 7 from {held[0]}" in text
        third.stop_gracefully()
        assert lease() is None
    finally:
        for owner in owners:
            if owner.proc.poll() is None:
                owner.proc.kill()
                owner.proc.wait(timeout=10)


def _lease_of(settings: Settings) -> tuple[str, datetime] | None:
    with session_scope(settings.db_url) as session:
        return lease_holder(session, settings.online_shard)
