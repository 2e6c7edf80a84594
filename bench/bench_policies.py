"""Throughput of the fixed-capacity policy simulator (core_c.PolicySim), one core, per policy.

    python bench/bench_policies.py                          # 20M accesses, ~2M distinct keys
    python bench/bench_policies.py --capacity-fraction 0.1 0.5 --accesses 5000000

The trace is bench/kvtrace.py's (prefix-dependent keys, Zipf documents, conversations) with
four request categories (by request index) and timestamps in ms spread over a few hours, so WA
fits many times. Times only the process_batch calls; the best of --repeat runs is reported.
Targets (issue 11): >= 10 M blocks/s for lru/fifo, >= 4 M blocks/s for lfu/gdfs/wa.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from kvtrace import generate

import core_c

TARGETS = {"lru": 10e6, "fifo": 10e6, "lfu": 4e6, "gdfs": 4e6, "wa": 4e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accesses", type=int, default=20_000_000)
    parser.add_argument("--capacity-fraction", type=float, nargs="+", default=[0.25], help="of the distinct keys")
    parser.add_argument("--policies", default="lru,fifo,lfu,gdfs,wa")
    parser.add_argument("--chunk-requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    trace = generate(args.accesses)
    distinct = len(np.unique(trace.keys))
    n = trace.requests
    timestamps = trace.timestamps_ms * 50_000_000  # ~3 requests per 50 ms: a few hours in all
    categories = (np.arange(n) % 4).astype(np.int32)
    span_h = (timestamps[-1] - timestamps[0]) / 3.6e12
    print(f"trace: {n:,} requests, {len(trace.keys):,} accesses, {distinct:,} distinct keys, {span_h:.1f} h")
    print(f"{'policy':6} {'capacity':>10} {'M blocks/s':>11} {'hit ratio':>10} {'evictions':>12} {'MiB':>7}  target")
    for fraction in args.capacity_fraction:
        capacity = max(1, int(distinct * fraction))
        for policy in args.policies.split(","):
            best, stats = float("inf"), None
            for _ in range(args.repeat):
                with core_c.PolicySim(policy, capacity, wa_refit_s=600.0, wa_fit_window_s=3600.0) as sim:
                    elapsed = 0.0
                    for lo in range(0, n, args.chunk_requests):
                        hi = min(n, lo + args.chunk_requests)
                        offsets = trace.offsets[lo : hi + 1]
                        keys = trace.keys[offsets[0] : offsets[-1]]
                        t0 = time.perf_counter()
                        sim.process_batch(keys, offsets - offsets[0], timestamps[lo:hi], categories[lo:hi])
                        elapsed += time.perf_counter() - t0
                    best = min(best, elapsed)
                    stats = sim.stats()
            assert stats is not None
            rate = len(trace.keys) / best
            verdict = "ok" if rate >= TARGETS.get(policy, 0) else "BELOW"
            print(
                f"{policy:6} {capacity:>10,} {rate / 1e6:>11.2f} {stats.hit_blocks / len(trace.keys):>10.4f} "
                f"{stats.evictions:>12,} {stats.memory_bytes / 2**20:>7.0f}  {verdict} (>= {TARGETS[policy] / 1e6:g})"
            )


if __name__ == "__main__":
    main()
