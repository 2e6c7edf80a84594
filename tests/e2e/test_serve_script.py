"""scripts/serve: the local stack without Docker in one command. On a new embedded SQLite
database and a private Redis it creates and migrates the database, starts the online owner, the
API and a Celery worker, serves a replay job and an online trace query through the API, and on
SIGINT (Ctrl-C) stops every process it started (the worker's pool included), the owner
releasing its lease."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from service_fixtures import ROOT, RedisServer, free_port, wait_for

pytestmark = pytest.mark.service


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment contains ``marker`` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_serve_starts_the_stack_and_ctrl_c_stops_it(tmp_path: Path, redis_server: RedisServer, data_dir: Path) -> None:
    home = tmp_path / "home"
    api_port, online_port, attribution_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    env.update(
        LITEHIT_HOME=str(home),
        LITEHIT_BROKER_URL=f"{redis_server.url}/0",
        LITEHIT_RESULT_BACKEND=f"{redis_server.url}/1",
        LITEHIT_QUEUE=f"serve-test-{os.getpid()}",
        LITEHIT_SERVE_API_PORT=str(api_port),
        LITEHIT_SERVE_ONLINE_PORT=str(online_port),
        LITEHIT_SERVE_ATTRIBUTION_PORT=str(attribution_port),
    )
    marker = f"LITEHIT_HOME={home}"
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        serve = subprocess.Popen(
            [str(ROOT / "scripts" / "serve")],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=sink,
            # A terminal's Ctrl-C reaches a foreground script; but a test run started in the
            # background inherits SIGINT ignored, and a shell cannot trap a signal ignored at entry.
            preexec_fn=_default_sigint,
        )
    try:
        base = f"http://127.0.0.1:{api_port}"

        def ready() -> bool:
            assert serve.poll() is None, log.read_text()
            try:
                return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(lambda: serve.poll() is None and "[serve] API on" in log.read_text(), 120, "the announcement")
        assert httpx.get(f"{base}/healthz", timeout=2).status_code == 200  # announced once it answers
        wait_for(ready, 120, "the API of scripts/serve", interval=0.3)
        assert (home / "litehit.db").is_file()  # created and migrated
        with httpx.Client(base_url=base, timeout=30) as client:
            trace = client.post("/v1/traces?name=c.jsonl", content=(data_dir / "conversation_trace.jsonl").read_bytes())
            assert trace.status_code == 201, trace.text
            spec = {
                "instance_group_name": "g",
                "instance_id": "b512",
                "block_size": 512,
                "location_spec_infos": [{"name": "kv", "size": 1 << 20}],
                "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
                "optimizer_state_info": {"full_location_spec_group_name": "full"},
            }
            body = {"trace_id": trace.json()["id"], "block_size": 512, "instance_groups": [{"name": "g"}]}
            submitted = client.post("/v1/replays", json={**body, "instances": [spec]})
            assert submitted.status_code == 202, submitted.text
            url = submitted.headers["location"]
            job = wait_for(
                lambda: (b := client.get(url).json())["state"] in ("succeeded", "failed") and b, 120, "the replay"
            )
            assert job["state"] == "succeeded", job
            assert client.post("/v1/online/groups", json={"name": "g", "capacity_gb": [1.0]}).status_code == 201
            assert client.post("/v1/online/instances", json=spec).status_code == 201
            query = "/v1/online/instances/b512/trace-queries"
            client.post(query, json={"block_keys": [1, 2]})
            assert client.post(query, json={"block_keys": [1, 2]}).json()["hit_blocks"] == [2]
            batch = {"epoch": "e", "seq": 0, "ts": time.time(), "events": [{"type": "removed", "block_hashes": [7]}]}
            assert client.post("/v1/attribution/workers/w/events", json=batch).json()["result"] == "new_epoch"
            answer = client.post("/v1/attribution/lookups", json={"worker": "w", "block_hash": 7}).json()
            assert answer["outcome"] == "evicted" and answer["evicted_at"] == batch["ts"]
        assert len(processes_with(marker)) >= 6  # the script, two owners, API, worker and its pool

        serve.send_signal(signal.SIGINT)
        try:
            code = serve.wait(timeout=90)
        except subprocess.TimeoutExpired:
            left = {
                pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in processes_with(marker)
            }
            pytest.fail(f"scripts/serve did not stop within 90 s; still running: {left}\n{log.read_text()}")
        assert code == 0, log.read_text()
        wait_for(lambda: not processes_with(marker), 10, "every process of scripts/serve to exit")
        text = log.read_text()
        assert text.count("[serve] stopping ") == 4 and "[serve] stopped" in text, text
        assert "Application shutdown complete." in text and "celery@" in text and "Task " in text, text
        with sqlite3.connect(home / "litehit.db") as db:
            assert db.execute("SELECT count(*) FROM online_shards").fetchone() == (0,)  # the leases released
            assert db.execute("SELECT count(*) FROM attribution_shards").fetchone() == (0,)
    finally:
        if serve.poll() is None:
            serve.kill()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
