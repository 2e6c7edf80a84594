"""A burst of concurrent attribution lookups through the public API (forwarded to the owner).

    python bench/bench_forwarding.py                       # 2,000 at once, the issue's load
    python bench/bench_forwarding.py --lookups 4000 --forward-limit 32

Starts a real attribution owner (`uvicorn api.attribution:app`) and the API (`uvicorn
api.main:app`, LITEHIT_ATTRIBUTION_URLS pointing at the owner), each on a free port with a
private SQLite home, sends one batch of events, then opens --lookups connections at once, each
sending one POST /v1/attribution/lookups, while a separate connection asks GET /healthz every
50 ms. The client is plain asyncio sockets (an HTTP client library's own pool would be the
bottleneck). Target (the hardening issue): every lookup answered 200 or 503 (Retry-After: the
API's bounded in-flight forwards, LITEHIT_FORWARD_LIMIT / LITEHIT_FORWARD_WAIT_S) within 10 s,
/healthz answering throughout; reported: the counts by status, p50 / p99 / max of the 200s, the
slowest answer of any kind and the slowest /healthz. --direct sends the burst straight to the
owner instead, for comparison; --owner-load N keeps the owner busy ingesting events from N client
processes meanwhile (a slow owner). Exits 1 when a lookup is not answered 200 or 503 within
--deadline-s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
from bench_service import free_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def wait_healthy(url: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


async def one_request(port: int, method: str, path: str, body: bytes, deadline_s: float) -> tuple[int, float]:
    """One request on its own connection (Connection: close); (status or -1 on timeout/error, seconds)."""
    start = time.perf_counter()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer = None
    try:
        async with asyncio.timeout(deadline_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            await writer.drain()
            status_line = await reader.readline()
            await reader.read()  # to the end: the answer is complete
        status = int(status_line.split()[1])
    except (TimeoutError, OSError, ValueError, IndexError):
        status = -1
    finally:
        if writer is not None:
            writer.close()
    return status, time.perf_counter() - start


def _load_owner(port: int, worker: str, seconds: float, batch: int) -> None:
    """Keeps the owner busy: batches of ``batch`` fresh block events on one connection, for
    ``seconds`` (a child process: an owner ingesting a busy engine's events while lookups come)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    deadline, seq = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        keys = list(range(seq * batch, (seq + 1) * batch))
        events = [{"type": "stored", "block_hashes": keys}]
        body = json.dumps({"epoch": "load", "seq": seq, "ts": time.time(), "events": events})
        conn.request("POST", f"/v1/attribution/workers/{worker}/events", body, {"content-type": "application/json"})
        conn.getresponse().read()
        seq += 1


async def burst(port: int, lookups: int, deadline_s: float) -> tuple[list[tuple[int, float]], list[float]]:
    health: list[float] = []
    done = asyncio.Event()

    async def poll_health() -> None:
        while not done.is_set():
            status, took = await one_request(port, "GET", "/healthz", b"", deadline_s)
            health.append(took if status == 200 else float("inf"))
            await asyncio.sleep(0.05)

    poller = asyncio.create_task(poll_health())
    bodies = [json.dumps({"worker": "vllm-0", "block_hash": i % 64}).encode() for i in range(lookups)]
    answers = await asyncio.gather(
        *(one_request(port, "POST", "/v1/attribution/lookups", b, deadline_s) for b in bodies)
    )
    done.set()
    await poller
    return list(answers), health


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--deadline-s", type=float, default=10.0)
    parser.add_argument("--forward-limit", type=int, help="LITEHIT_FORWARD_LIMIT of the API (default: its own)")
    parser.add_argument("--forward-wait-s", type=float, help="LITEHIT_FORWARD_WAIT_S of the API (default: its own)")
    parser.add_argument("--direct", action="store_true", help="send the burst straight to the owner")
    parser.add_argument(
        "--owner-load",
        type=int,
        default=0,
        help="client processes that keep the owner ingesting 20,000-block event batches during the burst",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as home:
        from litehit.db.migrate import upgrade

        upgrade(f"sqlite:///{home}/litehit.db")
        owner_port, api_port = free_port(), free_port()
        env = {
            **os.environ,
            "LITEHIT_HOME": home,
            "LITEHIT_ATTRIBUTION_MAX_LAG_S": "1000000000",
            "LITEHIT_ATTRIBUTION_URLS": f"http://127.0.0.1:{owner_port}",
            "LITEHIT_SWEEP_INTERVAL_S": "0",
        }
        if args.forward_limit is not None:
            env["LITEHIT_FORWARD_LIMIT"] = str(args.forward_limit)
        if args.forward_wait_s is not None:
            env["LITEHIT_FORWARD_WAIT_S"] = str(args.forward_wait_s)
        uvicorn = [sys.executable, "-m", "uvicorn", "--log-level", "warning", "--backlog", "4096"]
        procs = [subprocess.Popen([*uvicorn, "api.attribution:app", "--port", str(owner_port)], cwd=ROOT, env=env)]
        try:
            wait_healthy(f"http://127.0.0.1:{owner_port}")
            procs.append(subprocess.Popen([*uvicorn, "api.main:app", "--port", str(api_port)], cwd=ROOT, env=env))
            wait_healthy(f"http://127.0.0.1:{api_port}")
            events = {
                "epoch": "bench",
                "seq": 0,
                "ts": time.time(),
                "events": [
                    {"type": "stored", "block_hashes": list(range(32))},
                    {"type": "removed", "block_hashes": [1]},
                ],
            }
            r = httpx.post(f"http://127.0.0.1:{api_port}/v1/attribution/workers/vllm-0/events", json=events, timeout=10)
            r.raise_for_status()
            target = owner_port if args.direct else api_port
            loaders = [
                multiprocessing.Process(target=_load_owner, args=(owner_port, f"load-{n}", 3 * args.deadline_s, 20_000))
                for n in range(args.owner_load)
            ]
            for p in loaders:
                p.start()
            if loaders:
                time.sleep(1.0)  # the owner is busy before the burst comes
            started = time.perf_counter()
            answers, health = asyncio.run(burst(target, args.lookups, args.deadline_s))
            wall = time.perf_counter() - started
            for p in loaders:
                p.terminate()
                p.join()
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    print(f"pid {p.pid} ({p.args[-3]}) did not stop within 30 s of SIGTERM: killed")
                    p.kill()
                    p.wait()

    statuses = Counter(status for status, _ in answers)
    ok = np.sort(np.array([t for status, t in answers if status == 200]))
    slowest = max(t for _, t in answers)
    where = "straight to the owner" if args.direct else "through the API"
    if args.owner_load:
        where += f", the owner ingesting events from {args.owner_load} client(s)"
    print(f"{args.lookups:,} concurrent lookups {where}, all sent at once; {wall:.1f} s until the last answer")
    print("answers: " + ", ".join(f"{'timeout/error' if s == -1 else s}: {n:,}" for s, n in sorted(statuses.items())))
    if len(ok):
        p99 = ok[int(np.ceil(0.99 * len(ok))) - 1]
        print(f"200s: p50 {ok[len(ok) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {ok[-1] * 1000:.0f} ms")
    print(f"slowest answer of any kind: {slowest * 1000:.0f} ms")
    finite = [h for h in health if h != float("inf")]
    print(
        f"/healthz: {len(finite)} of {len(health)} polls answered during the burst, slowest "
        f"{max(finite) * 1000 if finite else float('nan'):.0f} ms"
    )
    good = set(statuses) <= {200, 503} and slowest <= args.deadline_s and len(finite) == len(health)
    print("target met: every lookup answered 200 or 503 within the deadline" if good else "TARGET MISSED")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
