"""Routing what-if throughput (issue 23), every figure measured in this one run.

    python bench/bench_routes.py                        # 20M blocks, 8 replicas
    python bench/bench_routes.py --blocks 5000000 --replicas 4 --repeat 1

On the same Mooncake JSONL (bench/kvtrace.py, cached under --cache-dir) it times, end to end in
child processes (the real CLI, process start included):

1. ``litehit replay`` of the trace (one 512-token lane) -- the reference;
2. ``litehit routes --replicas N`` with the four state-free routers in one pass (4 x N lanes);
3. ``litehit routes --routers cache_aware --capacity C`` (one simulation, C = --capacity-fraction
   of the distinct keys / N per replica);

and, in process, the routing simulator alone (core_c.route.RouteSim, cache_aware and
least_loaded at that capacity) over the trace's keys. Targets: (2) >= 0.5 x (1) in blocks/s;
cache_aware at one capacity >= 2 M blocks/s for N = 8.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from bench_replay import ensure_trace
from kvtrace import generate

from core_c.route import RouteSim


def timed(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:3])} failed: {done.stderr.strip()[-400:]}")
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20_000_000)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--capacity-fraction", type=float, default=0.25, help="of the distinct keys, over N replicas")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    args = parser.parse_args()

    trace_path = ensure_trace(args.blocks, args.cache_dir)
    trace = generate(args.blocks)
    distinct = len(np.unique(trace.keys))
    n = args.replicas
    capacity = max(1, int(distinct * args.capacity_fraction) // n)
    print(f"trace: {trace_path} ({args.blocks:,} blocks, {distinct:,} distinct keys, {trace.requests:,} requests)")
    litehit = str(Path(sys.executable).with_name("litehit"))
    common = ["--format", "mooncake", "--block-sizes", "512", "--workers", str(args.workers)]
    with tempfile.TemporaryDirectory() as out:
        replay = timed([litehit, "replay", str(trace_path), *common, "-o", out], args.repeat)
        free = timed(
            [litehit, "routes", str(trace_path), *common, "--replicas", str(n), "-o", f"{out}/free.json"], args.repeat
        )
        aware = timed(
            [litehit, "routes", str(trace_path), *common, "--replicas", str(n), "--routers", "cache_aware",
             "--capacity", f"{capacity}blocks", "-o", f"{out}/aware.json"],
            args.repeat,
        )  # fmt: skip
    rate = {name: args.blocks / s for name, s in (("replay", replay), ("free", free), ("aware", aware))}
    print(f"replay (1 lane):                          {replay:7.2f} s  {rate['replay'] / 1e6:6.2f} M blocks/s")
    print(
        f"routes, 4 state-free routers x {n} replicas: {free:7.2f} s  {rate['free'] / 1e6:6.2f} M blocks/s  "
        f"= {rate['free'] / rate['replay']:.2f} x replay  (target >= 0.50)"
    )
    print(
        f"routes, cache_aware at {capacity:,} blocks:   {aware:7.2f} s  {rate['aware'] / 1e6:6.2f} M blocks/s  "
        f"(end to end; target >= 2 M blocks/s)"
    )
    timestamps = np.asarray(trace.timestamps_ms, dtype=np.int64) * 1_000_000
    input_lens = np.diff(trace.offsets) * 512
    for router in ("cache_aware", "least_loaded"):
        best = float("inf")
        for _ in range(args.repeat):
            with RouteSim(router, replicas=n, capacity_blocks=capacity, block_size=512, window_ns=10**10,
                          threshold=Fraction(1, 10)) as sim:  # fmt: skip
                start = time.perf_counter()
                sim.process_batch(trace.keys, trace.offsets, timestamps, input_lens)
                best = min(best, time.perf_counter() - start)
        print(f"engine alone, {router:12}:             {best:7.2f} s  {len(trace.keys) / best / 1e6:6.2f} M blocks/s")


if __name__ == "__main__":
    main()
