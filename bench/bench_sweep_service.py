"""A policy sweep on the service scales with worker processes (issue 11).

    python bench/bench_sweep_service.py                 # 5 policies x 8 capacities, 1 then 2 workers

Starts a local stack (uvicorn + one Celery worker with --concurrency 1, then 2; PostgreSQL and
Redis on 127.0.0.1), uploads a bench/kvtrace.py trace as Mooncake JSONL, and times
POST /v1/policy-sweeps until the job succeeded. Target: with 2 worker processes the sweep takes
<= 0.6x the time of 1 (one task per lane x policy x capacity, spread over every worker).
"""

from __future__ import annotations

import argparse
import time

import httpx
from bench_service import CONFIG, local_stack
from kvtrace import generate, iter_mooncake_lines

SWEEP = {"policies": ["lru", "fifo", "lfu", "gdfs", "wa"], "capacity_gb": [0.5, 1, 2, 4, 8, 16, 32, 64]}


def run_sweep(url: str, trace: bytes) -> tuple[float, int]:
    with httpx.Client(base_url=url, timeout=120) as client:
        trace_id = client.post("/v1/traces?name=bench.jsonl", content=trace).json()["id"]
        start = time.perf_counter()
        r = client.post("/v1/policy-sweeps", json={**CONFIG, "trace_id": trace_id, "sweep": SWEEP})
        r.raise_for_status()
        job_id = r.json()["id"]
        while (job := client.get(f"/v1/policy-sweeps/{job_id}").json())["state"] not in ("succeeded", "failed"):
            time.sleep(0.1)
        if job["state"] != "succeeded":
            raise SystemExit(f"sweep {job_id} failed: {job['error']}")
        return time.perf_counter() - start, len({run["worker"] for run in job["runs"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accesses", type=int, default=3_000_000)
    parser.add_argument("--port", type=int, default=0, help="of the local API (default: a free one)")
    args = parser.parse_args()
    trace = "".join(iter_mooncake_lines(generate(args.accesses))).encode()
    print(
        f"trace: {len(trace) / 2**20:.0f} MiB, sweep: {len(SWEEP['policies'])} policies x {len(SWEEP['capacity_gb'])} capacities"
    )
    seconds = {}
    for workers in (1, 2):
        with local_stack(args.port, worker_concurrency=workers) as url:
            seconds[workers], used = run_sweep(url, trace)
        print(f"{workers} worker process(es): {seconds[workers]:.1f} s (simulations ran in {used} processes)")
    ratio = seconds[2] / seconds[1]
    print(f"2 workers / 1 worker = {ratio:.2f} ({'ok' if ratio <= 0.6 else 'ABOVE'} target <= 0.6)")


if __name__ == "__main__":
    main()
