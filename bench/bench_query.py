"""Facts query throughput: N facts rows x K capacities, including CSV parsing.

    python bench/bench_query.py                       # 1,000,000 rows x 32 capacities
    python bench/bench_query.py --facts path/to/litehit_facts.csv

Without --facts, 1,000,000 facts rows are made once by replaying a deterministic KV-cache-like
trace over four lanes (bench/kvtrace.py) and cached. Reports three timings (best of --repeat):
  summaries   parse + project + per-instance sums (no per-request output)
  rendered    the same plus rendering every per-request JSONL row (written to a discarding sink)
  to disk     the same written to a file through the atomic publisher (fsync included)
Target: 1M rows x 32 capacities in <= 2 s including CSV parsing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_replay import ensure_trace

from litehit.publish import AtomicPublisher
from litehit.query import parse_capacities, query_facts

CAPACITIES = [str(round(0.25 * 1.3**i, 3)) for i in range(31)] + ["-1"]


def ensure_facts(rows: int, cache_dir: Path) -> Path:
    facts = cache_dir / f"facts_{rows}.csv"
    if facts.exists():
        return facts
    trace = ensure_trace(20_000_000, cache_dir)
    with tempfile.TemporaryDirectory() as out:
        litehit = Path(sys.executable).with_name("litehit")
        subprocess.run(
            [
                str(litehit),
                "replay",
                str(trace),
                "--format",
                "mooncake",
                "--block-sizes",
                "512,1024",
                "--ttl-seconds",
                "0,60",
                "-o",
                out,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(Path(out) / "litehit_facts.csv", "rb") as src, open(facts.with_suffix(".tmp"), "wb") as dst:
            for i, line in enumerate(src):
                if i > rows:
                    break
                dst.write(line)
    facts.with_suffix(".tmp").replace(facts)
    return facts


class Discard:
    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: memoryview) -> None:
        self.bytes += len(data)


def best_of(repeat: int, fn) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    args = parser.parse_args()
    facts = args.facts or ensure_facts(args.rows, args.cache_dir)
    slots = parse_capacities(CAPACITIES)
    result = query_facts(facts, slots)
    print(f"facts: {facts} ({result.rows:,} rows, {facts.stat().st_size / 2**20:.0f} MiB) x {len(slots)} capacities")
    t_sum = best_of(args.repeat, lambda: query_facts(facts, slots))
    sink = Discard()
    t_render = best_of(args.repeat, lambda: query_facts(facts, slots, sink))  # type: ignore[arg-type]

    def to_disk() -> None:
        with tempfile.TemporaryDirectory(dir=facts.parent) as out, AtomicPublisher(Path(out) / "q.jsonl") as pub:
            query_facts(facts, slots, pub)  # type: ignore[arg-type]
            pub.commit()

    t_disk = best_of(args.repeat, to_disk)
    print(
        f"summaries: {t_sum:.2f} s   rendered: {t_render:.2f} s ({sink.bytes / args.repeat / 2**20:.0f} MiB JSONL)   "
        f"to disk: {t_disk:.2f} s   (best of {args.repeat}, cpu count {os.cpu_count()})"
    )


if __name__ == "__main__":
    main()
