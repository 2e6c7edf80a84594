"""Hybrid lane core (lh_hybrid.h) against the Full-only lane core on the same keys, in one run.

    python bench/bench_hybrid.py                       # 20M accesses, ~2M distinct keys
    python bench/bench_hybrid.py --accesses 2000000 --step-blocks 1 --ttl-seconds 60

Times only the process_batch calls (best of --repeat, the two cores alternated), chunk by chunk, of core_c.Lane and of
core_c.hybrid.HybridLane (Full charge 16384 B, Linear charge 4096 B, a state every --step-blocks
blocks and at each tail), and prints the ratio, plus the hybrid state per resident object (alive
Full blocks + alive Linear states). Targets (issue 22): >= 0.4x the lane core's speed, <= 48 B per
resident object.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from kvtrace import generate

import core_c
from core_c.hybrid import HybridLane


def timed(make: Callable[[], Any], trace: Any, timestamps: Any, chunk: int) -> tuple[float, Any]:
    with make() as lane:
        elapsed = 0.0
        for lo in range(0, trace.requests, chunk):
            hi = min(lo + chunk, trace.requests)
            offsets = trace.offsets[lo : hi + 1]
            start = time.perf_counter()
            lane.process_batch(trace.keys, offsets, timestamps[lo:hi])
            elapsed += time.perf_counter() - start
        return elapsed, lane.stats()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accesses", type=int, default=20_000_000)
    parser.add_argument("--chunk-requests", type=int, default=20_000)
    parser.add_argument("--step-blocks", type=int, default=4)
    parser.add_argument("--ttl-seconds", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    trace = generate(args.accesses)
    timestamps = trace.timestamps_ms * 1_000_000
    ttl = args.ttl_seconds * 10**9
    print(f"trace: {trace.requests:,} requests, {len(trace.keys):,} accesses, {len(np.unique(trace.keys)):,} distinct")
    full_s = hybrid_s = float("inf")
    for _ in range(args.repeat):  # alternated, so that a slower spell of the machine hits both
        seconds, _ = timed(lambda: core_c.Lane(ttl_ns=ttl), trace, timestamps, args.chunk_requests)
        full_s = min(full_s, seconds)
        seconds, hybrid = timed(
            lambda: HybridLane(full_charge=16384, linear_charge=4096, step_blocks=args.step_blocks, ttl_ns=ttl),
            trace,
            timestamps,
            args.chunk_requests,
        )
        hybrid_s = min(hybrid_s, seconds)
    n = len(trace.keys)
    objects = hybrid.unique_blocks + hybrid.resident_linear
    print(f"lane core (Full-only): {full_s:.3f} s = {n / full_s / 1e6:.2f} M accesses/s")
    print(
        f"hybrid core (step {args.step_blocks}): {hybrid_s:.3f} s = {n / hybrid_s / 1e6:.2f} M accesses/s "
        f"= {full_s / hybrid_s:.2f}x the lane core (target >= 0.40)"
    )
    print(
        f"hybrid state: {hybrid.memory_bytes / 2**20:.1f} MiB for {hybrid.unique_blocks:,} Full blocks + "
        f"{hybrid.resident_linear:,} Linear states = {hybrid.memory_bytes / max(objects, 1):.1f} B per resident "
        f"object (target <= 48); {hybrid.compactions} compactions, {hybrid.positions:,} positions at the end"
    )


if __name__ == "__main__":
    main()
