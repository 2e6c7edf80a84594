"""docker-compose.yml, proven without a container engine: the file is parsed and checked, then
every service's own command runs locally with the compose environment (service hostnames mapped
to 127.0.0.1, volumes to local directories) and one job is driven through that stack over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families
from service_fixtures import ROOT, RedisServer, drop_database, free_port, unavailable, wait_for

pytestmark = pytest.mark.service

COMPOSE = ROOT / "docker-compose.yml"


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def expand(value: str, env: dict[str, str]) -> str:
    """Compose variable interpolation: ${VAR:-default} and ${VAR}."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


def test_compose_file_shape() -> None:
    compose = load_compose()
    assert set(compose) == {"x-litehit-env", "services", "volumes"}  # no `name:`: compose v1 refuses it
    env_file = dict(
        line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines() if line[:1] not in ("", "#")
    )
    assert env_file == {"COMPOSE_PROJECT_NAME": "litehit"}
    services = compose["services"]
    assert set(services) == {
        "redis",
        "postgres",
        "migrate",
        "api",
        "worker",
        "online",
        "attribution",
        "flower",
        "prometheus",
    }
    for name in ("redis", "postgres"):
        assert services[name]["healthcheck"]["test"]
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    for name in ("migrate", "api", "worker", "online", "attribution"):  # shutdown stops them before the database
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert "@postgres:5432/" in services[name]["environment"]["LITEHIT_DATABASE_URL"]
    assert "postgres" not in services["flower"]["depends_on"]
    assert services["migrate"]["build"]["args"]["LITEHIT_PYTHON_IMAGE"] == "${LITEHIT_PYTHON_IMAGE:-python:3.11-slim}"
    assert services["redis"]["image"] == "${LITEHIT_REDIS_IMAGE:-redis:7-alpine}"
    assert services["postgres"]["image"] == "${LITEHIT_POSTGRES_IMAGE:-postgres:16-alpine}"
    for name in ("api", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        mounts = {m.split(":")[1]: m.split(":")[0] for m in services[name]["volumes"]}
        assert mounts[services[name]["environment"]["LITEHIT_STORAGE_ROOT"]] == "storage"
    assert "storage" in load_compose()["volumes"]
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # `--scale worker=4` works
    assert services["flower"]["profiles"] == ["flower"]
    assert services["api"]["ports"] == ["${LITEHIT_API_PORT:-8000}:8000"]
    online = services["online"]
    assert "--workers" not in online["command"] and "deploy" not in online  # one owner process per shard
    assert online["environment"]["LITEHIT_ONLINE_SHARD"] == "0"
    assert services["api"]["environment"]["LITEHIT_ONLINE_URLS"] == "http://online:8001"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "import core_c._core" in dockerfile  # the import smoke test of the image
    stages = dockerfile.split("\nFROM ")[1:]
    assert [s.split("\n")[0] for s in stages] == ["${LITEHIT_PYTHON_IMAGE} AS build", "${LITEHIT_PYTHON_IMAGE}"]
    assert "gcc" in stages[0] and "gcc" not in stages[1]  # compiled in the builder, shipped without a compiler
    assert "USER litehit" in stages[1]
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {".git", ".venv", "tests", "bench"} <= set(ignored)


class Stack:
    """The compose services as local processes, each on a private resource: free ports instead of
    the file's 8000-8002 (a developer's stack may hold those), a private database, Redis and
    queue, so that the test never talks to another stack nor another stack to it."""

    PORTS = ("8000", "8001", "8002", "9808")

    def __init__(self, tmp: Path, database: str, redis_url: str) -> None:
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self.ports = {port: str(free_port()) for port in self.PORTS}
        self.database, self.redis_url = database, redis_url
        self.queue = f"compose-test-{os.getpid()}"

    def private(self, text: str) -> str:
        """A command word or value of the compose file, pointed at this stack's own resources."""
        for port, mine in self.ports.items():
            text = text.replace(f":{port}", f":{mine}")
        text = re.sub(r"(postgresql://[^/]+/)litehit\b", rf"\g<1>{self.database}", text)
        return re.sub(r"redis://127\.0\.0\.1:6379", self.redis_url, text)

    def command(self, service: dict[str, Any]) -> list[str]:
        words = [str(w) for w in service["command"]]
        for i, word in enumerate(words):
            if i and words[i - 1] == "--port":
                words[i] = self.ports.get(word, word)
            elif i and words[i - 1] == "-Q":
                words[i] = self.queue
        return words

    def env_for(self, service: dict[str, Any], names: list[str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        for key, raw in (service.get("environment") or {}).items():
            value = expand(str(raw), {})
            for name in names:  # service hostnames -> this machine
                value = value.replace(f"@{name}:", "@127.0.0.1:").replace(f"//{name}:", "//127.0.0.1:")
            env[key] = self.private(value)
        env["LITEHIT_QUEUE"] = self.queue
        for mount in service.get("volumes") or []:  # named volumes -> local directories
            volume, path = mount.split(":")[:2]
            local = self.tmp / "volumes" / volume
            local.mkdir(parents=True, exist_ok=True)
            for key, value in list(env.items()):
                if key.startswith("LITEHIT_") and value == path:
                    env[key] = str(local)
        for key in ("LITEHIT_HOME",):
            if env.get(key, "").startswith("/data"):
                env[key] = str(self.tmp / "home")
        if "PROMETHEUS_MULTIPROC_DIR" in env:  # a container's own /tmp: a private directory here
            env["PROMETHEUS_MULTIPROC_DIR"] = str(self.tmp / "metrics")
        return env

    def start(self, name: str, service: dict[str, Any], names: list[str]) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                self.command(service), cwd=ROOT, env=self.env_for(service, names), stdout=sink, stderr=subprocess.STDOUT
            )
        self.procs[name], self.logs[name] = proc, log
        return proc

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def prepare_postgres(url: str) -> None:
    """The compose role and this stack's private database, on the local PostgreSQL (trust auth)."""
    m = re.match(r"postgresql://(\w+):([^@]*)@127\.0\.0\.1:(\d+)/(\w+)", url)
    assert m, url
    user, password, port, db = m.groups()
    try:
        admin = psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL is not reachable: {exc}")
    with admin:
        if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone():
            admin.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            admin.execute(f"CREATE DATABASE {db} OWNER {user}")


@pytest.fixture
def stack(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[Stack, dict[str, Any]]]:
    services = load_compose()["services"]
    names = list(services)
    database = f"litehit_compose_{os.getpid()}_{secrets.token_hex(3)}"
    s = Stack(tmp_path, database, redis_server.url)
    env = s.env_for(services["migrate"], names)
    broker = env["LITEHIT_BROKER_URL"]
    try:
        redis.Redis.from_url(broker, socket_timeout=2).ping()
    except redis.RedisError as exc:
        unavailable(f"Redis is not reachable at {broker}: {exc}")
    prepare_postgres(env["LITEHIT_DATABASE_URL"])
    try:
        yield s, services
    finally:
        s.stop()
        drop_database(database)


def test_compose_services_run_locally_and_serve_a_job(stack: tuple[Stack, dict[str, Any]], data_dir: Path) -> None:
    s, services = stack
    names = list(services)
    migrate = s.start("migrate", services["migrate"], names)
    assert migrate.wait(timeout=120) == 0, s.logs["migrate"].read_text()
    host_port = s.ports[expand(services["api"]["ports"][0], {}).split(":")[-1]]
    online = s.start("online", services["online"], names)
    wait_for(lambda: _healthy(services["online"], s, names, online), 60, "the online owner", interval=0.3)
    api = s.start("api", services["api"], names)
    worker = s.start("worker", services["worker"], names)
    check = services["api"]["healthcheck"]["test"]
    assert check[0] == "CMD"

    def healthy() -> bool:
        assert api.poll() is None, s.logs["api"].read_text()
        assert worker.poll() is None, s.logs["worker"].read_text()
        return (
            subprocess.run(
                [s.private(w) for w in check[1:]],
                env=s.env_for(services["api"], names),
                capture_output=True,
                check=False,
            ).returncode
            == 0
        )

    wait_for(healthy, 60, "the api healthcheck", interval=0.3)
    wait_for(lambda: b" ready." in s.logs["worker"].read_bytes(), 60, "the worker")
    base = f"http://127.0.0.1:{host_port}"
    with httpx.Client(base_url=base, timeout=30) as client:
        trace = client.post(
            "/v1/traces?name=conversation.jsonl", content=(data_dir / "conversation_trace.jsonl").read_bytes()
        )
        assert trace.status_code == 201, trace.text
        config = {
            "trace_id": trace.json()["id"],
            "block_size": 512,
            "instance_groups": [{"name": "g"}],
            "instances": [
                {
                    "instance_group_name": "g",
                    "instance_id": "b512",
                    "block_size": 512,
                    "location_spec_infos": [{"name": "kv", "size": 1 << 20}],
                    "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
                    "optimizer_state_info": {"full_location_spec_group_name": "full"},
                }
            ],
        }
        submitted = client.post("/v1/replays", json=config)
        assert submitted.status_code == 202, submitted.text
        url = submitted.headers["location"]
        job = wait_for(
            lambda: (b := client.get(url).json())["state"] in ("succeeded", "failed") and b, 120, "the replay"
        )
        assert job["state"] == "succeeded", job
        facts = client.get(job["facts"]["url"]).text.splitlines()[1:]
        curves = [line.split(',"')[1].rstrip('"') for line in facts]
        assert curves == (data_dir / "conversation_b512.curves").read_text().splitlines()
        query = client.post("/v1/queries", json={"replay_id": job["id"], "capacity_gb": [1, 16, -1]})
        done = wait_for(
            lambda: (b := client.get(query.headers["location"]).json())["state"] in ("succeeded", "failed") and b,
            120,
            "the query",
        )
        assert done["state"] == "succeeded", done
        assert done["total"]["requests"] == 12031 and len(done["total"]["hit_rates"]) == 3
        assert json.loads(client.get("/readyz").text)["status"] == "ready"
        # online mode through the public API -> the owner service
        group = {"name": "compose", "capacity_gb": [1.0], "enable_theoretical_max_cache": True}
        assert client.post("/v1/online/groups", json=group).status_code in (201, 409)
        inst = {**config["instances"][0], "instance_group_name": "compose", "instance_id": f"compose-{os.getpid()}"}
        assert client.post("/v1/online/instances", json=inst).status_code == 201
        url = f"/v1/online/instances/{inst['instance_id']}/trace-queries"
        client.post(url, json={"block_keys": [1, 2, 3]})
        again = client.post(url, json={"block_keys": [1, 2, 3]}).json()
        assert again["hit_blocks"] == [3] and again["max_hit_blocks"] == 3
        # /metrics sums the API's two processes: the one upload counts once, whichever answers
        for _ in range(4):
            scraped = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(client.get("/metrics").text)
                for s in f.samples
            }
            upload = (("method", "POST"), ("route", "/v1/traces"), ("status", "201"))
            assert scraped[("litehit_http_requests_total", upload)] == 1


def _healthy(service: dict[str, Any], s: Stack, names: list[str], proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, s.logs[next(n for n, p in s.procs.items() if p is proc)].read_text()
    check = [s.private(w) for w in service["healthcheck"]["test"]]
    return subprocess.run(check[1:], env=s.env_for(service, names), capture_output=True, check=False).returncode == 0


def test_flower_command_is_a_celery_command() -> None:
    flower = load_compose()["services"]["flower"]
    assert flower["command"][:4] == ["celery", "-A", "worker.celery_app", "flower"]
    assert shutil.which("celery", path=str(Path(sys.executable).parent))
