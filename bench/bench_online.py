"""Online trace-query throughput on one instance over HTTP (loopback), batch and single.

    python bench/bench_online.py                    # starts an owner itself (embedded SQLite)
    python bench/bench_online.py --url http://127.0.0.1:8001 --via-api   # an existing stack

Requests have 100 blocks each and mostly continue earlier requests (bench/kvtrace.py shapes).
Bodies are encoded before the clock starts, so the figure is the server's. Target: >= 20,000
requests/s of 100 blocks in batch form on a 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from bench_service import free_port

ROOT = Path(__file__).resolve().parent.parent
GROUP = {"name": "bench", "capacity_gb": [1, 4, 16, 64], "ttl_seconds": 0, "enable_theoretical_max_cache": True}
INSTANCE = {
    "instance_group_name": "bench",
    "instance_id": "node-0",
    "block_size": 512,
    "location_spec_infos": [{"name": "kv", "size": 1 << 20}],
    "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
    "optimizer_state_info": {"full_location_spec_group_name": "full"},
}


@contextlib.contextmanager
def local_owner(port: int) -> Iterator[str]:
    home = tempfile.mkdtemp(prefix="litehit-online-bench-")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}, "LITEHIT_HOME": home}
    bindir = Path(sys.executable).parent
    subprocess.run([str(bindir / "alembic"), "upgrade", "head"], cwd=ROOT, env=env, check=True, capture_output=True)
    proc = subprocess.Popen(
        [str(bindir / "uvicorn"), "api.online:app", "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def requests(n: int, blocks: int, seed: int = 5) -> list[list[int]]:
    """Conversations that grow: each request is an earlier one's prefix plus fresh blocks."""
    rng = np.random.default_rng(seed)
    out: list[list[int]] = []
    next_id = 0
    for _ in range(n):
        if out and rng.random() < 0.8:
            base = out[int(rng.integers(max(0, len(out) - 500), len(out)))]
            keep = int(rng.integers(blocks // 2, blocks))
            head = base[:keep]
        else:
            head = []
        fresh = blocks - len(head)
        out.append(head + list(range(next_id, next_id + fresh)))
        next_id += fresh
    return out


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> bytes:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise SystemExit(f"{path}: {response.status} {data[:300]!r}")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an online owner (or the public API with --via-api); default: start one")
    parser.add_argument("--port", type=int, default=0, help="of the owner started here (default: a free one)")
    parser.add_argument("--batch", type=int, default=1000, help="requests per batch call")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--blocks", type=int, default=100)
    args = parser.parse_args()
    owner = contextlib.nullcontext(args.url) if args.url else local_owner(args.port or free_port())
    with owner as url:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        with contextlib.suppress(SystemExit):
            post(conn, "/v1/online/groups", json.dumps(GROUP).encode())
        with contextlib.suppress(SystemExit):
            post(conn, "/v1/online/instances", json.dumps(INSTANCE).encode())
        base = f"/v1/online/instances/{INSTANCE['instance_id']}/trace-queries"
        pool = requests(40 * args.batch, args.blocks)
        bodies = [
            json.dumps(
                {
                    "requests": [
                        {"block_keys": keys, "input_token_len": len(keys) * 512 + 100}
                        for keys in pool[i : i + args.batch]
                    ]
                }
            ).encode()
            for i in range(0, len(pool), args.batch)
        ]
        sent, start, i = 0, time.perf_counter(), 0
        while time.perf_counter() - start < args.seconds:
            post(conn, f"{base}/batch", bodies[i % len(bodies)])
            sent += args.batch
            i += 1
        batch_rate = sent / (time.perf_counter() - start)
        singles = [json.dumps({"block_keys": k, "input_token_len": len(k) * 512 + 100}).encode() for k in pool[:5000]]
        sent, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds / 2:
            post(conn, base, singles[sent % len(singles)])
            sent += 1
        single_rate = sent / (time.perf_counter() - start)
        conn.request("GET", f"/v1/online/instances/{INSTANCE['instance_id']}")
        summary = json.loads(conn.getresponse().read())
    print(
        f"batch form ({args.batch} requests x {args.blocks} blocks per call): {batch_rate:,.0f} requests/s "
        f"= {batch_rate * args.blocks / 1e6:.2f} M blocks/s"
    )
    print(f"single form (one request per call, one connection): {single_rate:,.0f} requests/s")
    print(
        f"instance after the run: {summary['total_queries']:,} queries, hit rates {[round(r, 3) for r in summary['hit_rates']]}"
        f", {summary['unique_blocks']:,} unique blocks, {summary['engine_memory_bytes'] / 2**20:.1f} MiB engine state"
    )


if __name__ == "__main__":
    main()
