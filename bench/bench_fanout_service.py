"""Two lanes on the service with two worker processes against one lane with one (issue 25).

    python bench/bench_fanout_service.py                   # 10 M accesses, ~1.2 M distinct keys
    python bench/bench_fanout_service.py --accesses 20000000

Starts a local stack (uvicorn + one Celery worker with --concurrency 1, then 2; PostgreSQL and
Redis on 127.0.0.1, a free port), uploads a bench/kvtrace.py trace as Mooncake JSONL, and times
POST /v1/replays until the job succeeded: one lane (b512) on one worker process, then two lanes
(b512 and a second 512-token lane, fanned out: the same blocks each) on two. A replay job stages
the trace once (parsed into each lane's requests), runs its lanes (lanes that see the same
requests and differ only in TTL, as these two, in one task on one lane core with a TTL view each;
any other lane in a task of its own), then merges the facts; the ratio is the lane-blocks per
second of the second run over the first, measured in this one run. Target: >= 1.7x.
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

import httpx
from bench_service import CONFIG, free_port, local_stack
from kvtrace import generate, iter_mooncake_lines


def two_lanes() -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    second = copy.deepcopy(config["instances"][0])
    second["instance_id"] = "b512_twin"
    config["instances"].append(second)
    config["fanout_all_instances"] = True
    return config


def run_replay(url: str, trace: bytes, config: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=600) as client:
        trace_id = client.post("/v1/traces?name=bench.jsonl", content=trace).json()["id"]
        start = time.perf_counter()
        r = client.post("/v1/replays", json={**config, "trace_id": trace_id, "trace_format": "mooncake"})
        r.raise_for_status()
        job_id = r.json()["id"]
        while (job := client.get(f"/v1/replays/{job_id}").json())["state"] not in ("succeeded", "failed"):
            time.sleep(0.05)
        if job["state"] != "succeeded":
            raise SystemExit(f"replay {job_id} failed: {job['error']}")
        return time.perf_counter() - start, job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accesses", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="jobs per setup; the fastest counts")
    args = parser.parse_args()
    trace_rows = generate(args.accesses)
    trace = "".join(iter_mooncake_lines(trace_rows)).encode()
    blocks = int(trace_rows.offsets[-1])
    print(f"trace: {len(trace) / 2**20:.0f} MiB, {blocks:,} blocks")
    rates = {}
    for lanes, workers, config in ((1, 1, CONFIG), (2, 2, two_lanes())):
        with local_stack(free_port(), worker_concurrency=workers) as url:
            best = min(run_replay(url, trace, config)[0] for _ in range(args.repeat))
        rates[lanes] = lanes * blocks / best
        print(
            f"{lanes} lane(s) on {workers} worker process(es): {best:.2f} s submit -> succeeded = "
            f"{rates[lanes] / 1e6:.2f} M lane-blocks/s"
        )
    ratio = rates[2] / rates[1]
    print(
        f"two lanes on 2 workers / one lane on 1 worker = {ratio:.2f}x ({'ok' if ratio >= 1.7 else 'BELOW'} target >= 1.7x)"
    )


if __name__ == "__main__":
    main()
