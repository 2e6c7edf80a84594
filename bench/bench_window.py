"""End-to-end window sizing: Mooncake JSONL on disk -> window.json (`litehit window`).

    python bench/bench_window.py                                  # 20M blocks, 256 GiB, lru
    python bench/bench_window.py --blocks 2000000 --capacity-gb 16 --policy fifo --repeat 1

The trace is bench/kvtrace.py's (cached like bench_replay.py's). Each run is the real CLI in a
child process (process start included; best of --repeat; peak RSS of the child). For
comparison the same trace, capacity and policy through `litehit policies`, which simulates
without miss evidence: the difference is the cost of the evidence (one map entry per distinct
evicted key, one lookup per missing request) and of the report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_replay import ensure_trace


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of a child process that must succeed."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def best_of(repeat: int, cmd: list[str]) -> tuple[float, float]:
    runs = [timed(cmd) for _ in range(repeat)]
    return min(t for t, _ in runs), max(m for _, m in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20_000_000)
    parser.add_argument("--capacity-gb", default="256")
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    args = parser.parse_args()

    trace = ensure_trace(args.blocks, args.cache_dir)
    print(f"trace: {trace} ({trace.stat().st_size / 2**20:.0f} MiB, {args.blocks:,} full blocks)")
    litehit = str(Path(sys.executable).with_name("litehit"))
    common = [str(trace), "--format", "mooncake", "--workers", str(args.workers), "--capacity-gb", args.capacity_gb]
    with tempfile.TemporaryDirectory() as out:
        window_json = Path(out) / "window.json"
        seconds, rss = best_of(
            args.repeat, [litehit, "window", *common, "--policy", args.policy, "-o", str(window_json)]
        )
        sweep, sweep_rss = best_of(args.repeat, [litehit, "policies", *common, "--policies", args.policy])
        (lane,) = json.loads(window_json.read_text())["lanes"]
    print(
        f"window: {seconds:.2f} s = {args.blocks / seconds / 1e6:.2f} M blocks/s end to end "
        f"(best of {args.repeat}); peak RSS {rss:.0f} MiB"
    )
    print(f"policies (same simulation, no evidence): {sweep:.2f} s; peak RSS {sweep_rss:.0f} MiB")
    o, d = lane["outcomes"], lane["delay_s"]
    print(
        f"{args.policy} at {args.capacity_gb} GiB = {lane['capacity_blocks']:,} blocks: {lane['evictions']:,} evictions, "
        f"{o['evicted']:,} evicted / {o['no_match']:,} no_match misses; delay p99 {d['p99']} s; "
        f"W = {lane['window_s']:g} s; E = {lane['peak_evictions_per_s']:,}/s; memory {lane['memory_mib']:.1f} MiB"
    )


if __name__ == "__main__":
    main()
