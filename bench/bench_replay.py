"""End-to-end replay throughput: Mooncake JSONL on disk -> published litehit_facts.csv.

    python bench/bench_replay.py                       # 20M blocks, workers 2
    python bench/bench_replay.py --blocks 2000000 --workers 1 --repeat 1

The trace is generated deterministically (bench/kvtrace.py) and cached under --cache-dir. Each
replay runs the real CLI (`litehit replay TRACE --format mooncake`) in a child process, so peak
RSS is that of the replay alone. Target: >= 6M blocks/s on 2 cores; memory bounded by the
engine state, not by the trace length (compare --blocks 5000000 and 20000000).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvtrace import generate, iter_mooncake_lines


def ensure_trace(blocks: int, cache_dir: Path) -> Path:
    """The cached trace of `blocks` blocks, written first when missing. It is generated in a child
    process: on Linux a child's peak RSS (wait4's ru_maxrss) starts from its parent's peak at the
    exec, so a bench that held the generated trace would inflate every figure it measures after."""
    path = cache_dir / f"kvtrace_mooncake_{blocks}.jsonl"
    if not path.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        here = str(Path(__file__).resolve().parent)
        code = f"import sys; sys.path.insert(0, {here!r}); import bench_replay; bench_replay.write_trace({blocks}, {str(path)!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def write_trace(blocks: int, path: str) -> None:
    """Writes bench/kvtrace.py's Mooncake trace of `blocks` blocks to path (tmp, then rename)."""
    trace = generate(blocks)
    tmp = Path(path).with_suffix(".tmp")
    with tmp.open("w") as f:
        f.writelines(iter_mooncake_lines(trace))
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    parser.add_argument("--block-sizes", default="512")
    args = parser.parse_args()

    trace = ensure_trace(args.blocks, args.cache_dir)
    size = trace.stat().st_size
    print(f"trace: {trace} ({size / 2**20:.0f} MiB, {args.blocks:,} full blocks)")
    litehit = Path(sys.executable).with_name("litehit")
    best, peak, engine = float("inf"), 0.0, 0.0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            cmd = [
                str(litehit),
                "replay",
                str(trace),
                "--format",
                "mooncake",
                "--block-sizes",
                args.block_sizes,
                "--workers",
                str(args.workers),
                "-o",
                out,
            ]
            start = time.perf_counter()
            child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            output = child.stdout.read() if child.stdout else ""
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                raise SystemExit(f"replay failed with exit code {child.returncode}")
            best = min(best, time.perf_counter() - start)
            peak = max(peak, usage.ru_maxrss / 1024)
            engine = sum(float(m) for m in re.findall(r"([0-9.]+) MiB engine state", output))
            facts_mib = (Path(out) / "litehit_facts.csv").stat().st_size / 2**20
    lanes = len(args.block_sizes.split(","))
    print(
        f"replay: {best:.2f} s (best of {args.repeat}, process start included) = "
        f"{args.blocks / best / 1e6:.2f} M blocks/s per lane x {lanes} lane(s), {size / best / 2**20:.0f} MiB/s of JSONL"
    )
    print(
        f"facts: {facts_mib:.0f} MiB; peak RSS of the replay process: {peak:.0f} MiB "
        f"(engine state at the end: {engine:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
