"""End-to-end workload profile: Mooncake JSONL on disk -> profile.json (`litehit profile`).

    python bench/bench_profile.py                          # 20M blocks, one core (--workers 1)
    python bench/bench_profile.py --blocks 2000000 --repeat 1

The trace is bench/kvtrace.py's (cached like bench_replay.py's). Each run is the real CLI in a
child process (process start included; best of --repeat; peak RSS of the child). For comparison
`litehit replay` on the same trace and workers: the issue's targets are >= 5 M blocks/s for the
profile on one core and a peak RSS no more than 2x the replay's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench_replay import ensure_trace
from bench_window import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20_000_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    args = parser.parse_args()

    trace = ensure_trace(args.blocks, args.cache_dir)
    print(f"trace: {trace} ({trace.stat().st_size / 2**20:.0f} MiB, {args.blocks:,} full blocks)")
    litehit = str(Path(sys.executable).with_name("litehit"))
    common = [str(trace), "--format", "mooncake", "--workers", str(args.workers)]
    with tempfile.TemporaryDirectory() as out:
        profile_json = Path(out) / "profile.json"
        seconds, rss = best_of(args.repeat, [litehit, "profile", *common, "-o", str(profile_json)])
        replay, replay_rss = best_of(args.repeat, [litehit, "replay", *common, "--output", str(Path(out) / "facts")])
        (lane,) = json.loads(profile_json.read_text())["lanes"]
    print(
        f"profile: {seconds:.2f} s = {args.blocks / seconds / 1e6:.2f} M blocks/s end to end with "
        f"{args.workers} worker(s) (best of {args.repeat}); peak RSS {rss:.0f} MiB"
    )
    print(
        f"replay (same trace and workers): {replay:.2f} s; peak RSS {replay_rss:.0f} MiB; "
        f"profile / replay RSS = {rss / replay_rss:.2f}x"
    )
    o = lane["overall"]
    print(
        f"ideal hit ratio {o['ideal_hit_ratio']:.2%}; {o['reuse_time']['count']:,} reuses, "
        f"{o['lifespan']['keys']:,} keys ({o['lifespan']['never_reused_share']:.1%} never reused); "
        f"capacity for 90%: {o['capacity']['90']['blocks']:,} blocks"
    )


if __name__ == "__main__":
    main()
