"""Fixtures for the service tests: a fresh PostgreSQL database migrated by Alembic, a private
redis-server that tests may restart, real Celery worker processes and the API.

Outside CI a missing PostgreSQL or redis-server skips these tests; with CI=true (or 1, yes) it
fails them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from litehit.db.migrate import downgrade, upgrade
from litehit.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = os.environ.get("LITEHIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def running_in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """True when CI is true, 1 or yes (any case); CI=false, CI=0 or an empty CI is not CI."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")


def unavailable(reason: str) -> None:
    if running_in_ci():
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def create_database() -> tuple[str, str]:
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL is not reachable at {PG_ADMIN}: {exc}")
    name = f"litehit_test_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + f"/{name}"
    return name, url


def drop_database(name: str) -> None:
    with contextlib.suppress(psycopg.Error), psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    name, url = create_database()
    upgrade(url)
    yield url
    drop_database(name)


@dataclass
class RedisServer:
    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self.ping, 10, "redis-server to answer")

    def ping(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)  # a crash: every queued message is gone
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed")
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def service_settings(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str, redis_server: RedisServer
) -> Settings:
    home = tmp_path_factory.mktemp("home")
    return Settings(
        home=home,
        storage_root=home / "storage",
        database_url=postgres_url,
        broker_url=f"{redis_server.url}/0",
        result_backend=f"{redis_server.url}/1",
        queue=f"litehit-test-{os.getpid()}",
        heartbeat_s=0.3,
        stale_after_s=3.0,
        sweep_interval_s=0.5,
        task_max_attempts=3,
    )


def settings_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"LITEHIT_{name.upper()}"] = str(value)
    return env


class Workers:
    """``celery worker`` processes under a restart policy, like the compose stack's
    ``restart: unless-stopped``: a worker that dies (killed, or crashed by the broker going
    away) is started again, and the recovery sweep hands its work out again."""

    def __init__(self, settings: Settings, log: Path) -> None:
        self.settings, self.log = settings, log
        self.restarts = 0
        self._stopping = threading.Event()
        self.proc = self._start()
        self._watch = threading.Thread(target=self._supervise, daemon=True)
        self._watch.start()

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as sink:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "worker.celery_app",
                    "worker",
                    "-Q",
                    self.settings.queue,
                    "--concurrency",
                    "2",
                    "--pool",
                    "prefork",
                    "--without-gossip",
                    "--without-mingle",
                    "-l",
                    "info",
                    "-n",
                    f"test-{os.getpid()}@%h",
                ],
                cwd=ROOT,
                env=settings_env(self.settings),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            if self.proc.poll() is not None and not self._stopping.is_set():
                with self.log.open("ab") as sink:
                    sink.write(f"--- worker exited with {self.proc.returncode}; restarting ---\n".encode())
                self.restarts += 1
                self.proc = self._start()
            time.sleep(0.2)

    def children(self) -> list[int]:
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True, check=False
        )
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        self._stopping.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def celery_workers(service_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    log = tmp_path_factory.mktemp("celery") / "worker.log"
    workers = Workers(service_settings, log)
    try:
        wait_for(lambda: b" ready." in log.read_bytes(), 60, "the Celery worker to start")
        wait_for(lambda: len(workers.children()) >= 2, 30, "two worker processes")
        yield workers
    finally:
        workers.stop()


@pytest.fixture
def api(service_settings: Settings, celery_workers: Workers) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from api.main import create_app

    with TestClient(create_app(service_settings)) as client:
        yield client


__all__ = [
    "RedisServer",
    "Workers",
    "downgrade",
    "free_port",
    "running_in_ci",
    "settings_env",
    "unavailable",
    "upgrade",
    "wait_for",
]
