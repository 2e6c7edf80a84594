"""Core-only throughput and memory of the lane engine through the batch entry point.

    python bench/bench_core.py                  # 20M accesses, ~2M distinct keys
    python bench/bench_core.py --accesses 2000000 --ttl-seconds 60

Reports accesses/s (timing only the process_batch calls), peak RSS of the process and bytes of
core state per unique block. Targets: >= 12M accesses/s single-threaded, <= 40 B per block.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from kvtrace import generate

import core_c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accesses", type=int, default=20_000_000)
    parser.add_argument("--chunk-requests", type=int, default=20_000, help="requests per batch call")
    parser.add_argument("--ttl-seconds", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="replays; the best is reported")
    args = parser.parse_args()

    t0 = time.perf_counter()
    trace = generate(args.accesses)
    gen_s = time.perf_counter() - t0
    distinct = len(np.unique(trace.keys))
    timestamps = trace.timestamps_ms * 1_000_000
    print(
        f"trace: {trace.requests:,} requests, {len(trace.keys):,} accesses, {distinct:,} distinct keys "
        f"(generated in {gen_s:.1f} s)"
    )

    best = float("inf")
    for _ in range(args.repeat):
        with core_c.Lane(ttl_ns=args.ttl_seconds * 10**9) as lane:
            elapsed = 0.0
            for lo in range(0, trace.requests, args.chunk_requests):
                hi = min(lo + args.chunk_requests, trace.requests)
                offsets = trace.offsets[lo : hi + 1]
                start = time.perf_counter()
                lane.process_batch(trace.keys, offsets, timestamps[lo:hi])
                elapsed += time.perf_counter() - start
            stats = lane.stats()
        best = min(best, elapsed)
    rate = len(trace.keys) / best
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    per_block = stats.memory_bytes / max(stats.unique_blocks, 1)
    print(
        f"core: {best:.3f} s for {len(trace.keys):,} accesses = {rate / 1e6:.2f} M accesses/s (best of {args.repeat})"
    )
    print(
        f"state: {stats.memory_bytes / 2**20:.1f} MiB for {stats.unique_blocks:,} unique blocks = "
        f"{per_block:.1f} B/block; compactions {stats.compactions}"
    )
    print(f"peak RSS: {peak_rss / 2**20:.0f} MiB (includes the generated trace arrays)")


if __name__ == "__main__":
    main()
