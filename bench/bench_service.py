"""Service latency on a local stack (loopback only, bounded).

    python bench/bench_service.py --start-local      # starts uvicorn + a Celery worker itself
    python bench/bench_service.py --url http://127.0.0.1:8000   # a running stack (compose)

1. submit -> succeeded latency of a replay of the Mooncake conversation trace (upload first,
   then timed: POST /v1/replays until GET says succeeded), median and max of --jobs runs.
   Target: <= 3 s.
2. GET /v1/replays/{id} at a fixed open-loop rate (default 200 requests/s for 30 s); latency
   percentiles. Target: p99 <= 25 ms.
--start-local needs PostgreSQL (127.0.0.1:5432, trust) and Redis (127.0.0.1:6379).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "examples" / "data" / "conversation_trace.jsonl"
CONFIG = {
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


def free_port() -> int:
    """A port no one listens on now (a developer may be running a stack on the usual ones)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_stack(
    port: int = 0,
    api_workers: int = 2,
    worker_concurrency: int = 2,
    *,
    quiet: bool = False,
    name: str = "litehit_bench",
) -> Iterator[str]:
    """A local API and worker on `port` (0: a free one); yields the API's URL. quiet: their output
    (the worker's banner) is dropped. name: its database (made anew) and, with "-" for "_", its
    queue: stacks of different names can run at once."""
    import psycopg

    port = port or free_port()

    db = name
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {db}")
    home = Path(tempfile.mkdtemp(prefix="litehit-bench-"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")},
        "LITEHIT_DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{db}",
        "LITEHIT_HOME": str(home),
        "LITEHIT_BROKER_URL": "redis://127.0.0.1:6379/0",
        "LITEHIT_RESULT_BACKEND": "redis://127.0.0.1:6379/1",
        "LITEHIT_QUEUE": name.replace("_", "-"),
        "LITEHIT_HEARTBEAT_S": "0.5",
    }
    bindir = Path(sys.executable).parent
    subprocess.run([str(bindir / "alembic"), "upgrade", "head"], cwd=ROOT, env=env, check=True, capture_output=True)
    out = subprocess.DEVNULL if quiet else None
    procs = [
        subprocess.Popen(
            [
                str(bindir / "uvicorn"),
                "api.main:app",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--workers",
                str(api_workers),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        ),
        subprocess.Popen(
            [
                str(bindir / "celery"),
                "-A",
                "worker.celery_app",
                "worker",
                "-Q",
                name.replace("_", "-"),
                "--concurrency",
                str(worker_concurrency),
                "-l",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        ),
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the local stack did not become ready")
            time.sleep(0.2)
        time.sleep(2)  # let the worker connect
        yield url
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)


def submit_latency(url: str, jobs: int) -> tuple[list[float], str]:
    with httpx.Client(base_url=url, timeout=60) as client:
        trace = client.post("/v1/traces?name=conversation.jsonl", content=TRACE.read_bytes()).json()["id"]
        times, job_id = [], ""
        for _ in range(jobs):
            start = time.perf_counter()
            r = client.post("/v1/replays", json={**CONFIG, "trace_id": trace})
            r.raise_for_status()
            job_id = r.json()["id"]
            while (state := client.get(f"/v1/replays/{job_id}").json()["state"]) not in ("succeeded", "failed"):
                time.sleep(0.02)
            if state != "succeeded":
                raise SystemExit(f"job {job_id} {state}")
            times.append(time.perf_counter() - start)
        return times, job_id


async def get_load(url: str, job_id: str, rate: float, seconds: float, connections: int = 32) -> list[float]:
    """Open-loop GETs over keep-alive HTTP/1.1 connections (a lean client: the load generator
    shares the machine's two cores with the server and must not starve it)."""
    host, port = url.removeprefix("http://").split(":")
    request = f"GET /v1/replays/{job_id} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(await asyncio.open_connection(host, int(port)))
    latencies: list[float] = []
    failures = 0

    async def one(scheduled: float) -> None:
        nonlocal failures
        reader, writer = await pool.get()
        writer.write(request)
        await writer.drain()
        status = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - scheduled)  # includes any wait for a free connection
        failures += not status.startswith(b"HTTP/1.1 200")
        pool.put_nowait((reader, writer))

    tasks = []
    t0 = time.perf_counter()
    for i in range(int(rate * seconds)):
        scheduled = t0 + i / rate
        if (delay := scheduled - time.perf_counter()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    while not pool.empty():
        pool.get_nowait()[1].close()
    if failures:
        raise SystemExit(f"{failures} requests failed")
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--start-local", action="store_true")
    parser.add_argument("--port", type=int, default=0, help="of --start-local's API (default: a free one)")
    parser.add_argument("--api-workers", type=int, default=2, help="uvicorn processes of --start-local (compose: 2)")
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    stack = local_stack(args.port, args.api_workers) if args.start_local else contextlib.nullcontext(args.url)
    with stack as url:
        times, job_id = submit_latency(url, args.jobs)
        print(
            f"submit -> succeeded (conversation trace, {args.jobs} jobs): median {statistics.median(times):.3f} s, "
            f"max {max(times):.3f} s"
        )
        lat = sorted(asyncio.run(get_load(url, job_id, args.rate, args.seconds)))
        pct = {p: lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1000 for p in (50, 90, 99)}
        print(
            f"GET /v1/replays/{{id}} at {args.rate:.0f}/s for {args.seconds:.0f} s ({len(lat)} requests): "
            f"p50 {pct[50]:.1f} ms, p90 {pct[90]:.1f} ms, p99 {pct[99]:.1f} ms, max {lat[-1] * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
