"""Tier split and tier planner speed.

    python bench/bench_tiers.py                 # 1,000,000 facts rows x 3 tiers x 32 configurations
    python bench/bench_tiers.py --facts F.csv

split   the facts read into lanes (CSV parsing included), then every lane's split at 32
        configurations of three tiers (HBM, DRAM, SSD) through the C projector; again with the
        prefill model (per-request estimates for every configuration). Target: <= 2 s.
online  the live curve's share of an online trace query (in process, 1,000-request batches of 100
        blocks, bench/bench_online.py's shapes): the time of LiveCurve.add on the batches' facts
        over the time of the rest of the query. Target: <= 20%.
plan    `litehit plan` on the bundled trace's facts (Llama-3.1-8B on an H100 with its spare HBM,
        DRAM 0..2 TiB, SSD 0..16 TiB, a 30% hit-rate target, the prefill model). Target: <= 5 s.
Best of --repeat; every figure is measured in this run, the ratio is figure / target.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_query import ensure_facts

from litehit.capacity import parse_capacities
from litehit.tiers.config import TierMode
from litehit.tiers.document import model_of
from litehit.tiers.lanes import load_lanes
from litehit.tiers.options import PrefillOptions, Tier
from litehit.tiers.split import split_lane

BUNDLED = Path(__file__).resolve().parents[1] / "examples" / "data" / "conversation_trace.jsonl"
CONFIGS = [[f"{h}GiB", f"{d}GiB", "inf"] for h in (8, 16, 32, 64) for d in (0, 64, 128, 256, 512, 1024, 2048, 4096)]


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_split(facts: Path, repeat: int) -> None:
    configs = [parse_capacities(c) for c in CONFIGS]
    tiers = [Tier(name=n, capacity="1GiB") for n in ("hbm", "dram", "ssd")]
    model = model_of(PrefillOptions(model="Llama-3.1-8B", gpu="H100-SXM"), tiers)
    lanes = load_lanes(facts)
    rows = sum(lane.requests for lane in lanes)

    def split(with_model: bool) -> None:
        for lane in load_lanes(facts):
            split_lane(lane, configs, TierMode.EXCLUSIVE, prefill=model if with_model else None)

    t_read = best_of(repeat, lambda: load_lanes(facts))
    t_split = best_of(repeat, lambda: split(False))
    t_model = best_of(repeat, lambda: split(True))
    print(f"facts: {facts} ({rows:,} rows in {len(lanes)} lanes) x 3 tiers x {len(configs)} configurations")
    print(
        f"split: {t_split:.2f} s including {t_read:.2f} s of reading (target 2 s: ratio {t_split / 2:.2f}); "
        f"with the prefill model {t_model:.2f} s (ratio {t_model / 2:.2f})"
    )


def bench_plan(repeat: int) -> None:
    litehit = str(Path(sys.executable).with_name("litehit"))
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [litehit, "replay", str(BUNDLED), "--model", "Llama-3.1-8B", "-o", out],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        command = [
            litehit, "plan", f"{out}/litehit_facts.csv", "--tier", "hbm=spare", "--tier", "dram=0..2TiB",
            "--tier", "ssd=0..16TiB", "--price", "dram=0.004", "--price", "ssd=0.0002", "--target-hit-rate", "0.3",
            "--model", "Llama-3.1-8B", "--gpu", "H100-SXM",
        ]  # fmt: skip
        env = {**os.environ, "LITEHIT_RECORD_JOBS": "0"}
        t_plan = best_of(repeat, lambda: subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env))
    print(f"plan (bundled trace, one process, start-up included): {t_plan:.2f} s (target 5 s: ratio {t_plan / 5:.2f})")


def bench_online_curve(repeat: int) -> None:
    import numpy as np
    from bench_online import GROUP, INSTANCE, requests

    import core_c
    from litehit.online.curve import LiveCurve
    from litehit.online.engine import OnlineInstance, TraceQuery
    from litehit.spec import InstanceGroup, InstanceInfo

    pool = requests(40_000, 100)
    batches = [
        [TraceQuery(keys, len(keys) * 512 + 100, 0) for keys in pool[i : i + 1000]] for i in range(0, len(pool), 1000)
    ]

    def queries() -> None:
        inst = OnlineInstance(InstanceInfo.model_validate(INSTANCE), InstanceGroup.model_validate(GROUP))
        for batch in batches:
            inst.query(batch)
        inst.close()

    segments = []
    lane = core_c.Lane(ttl_ns=0)
    for batch in batches:
        keys = np.concatenate([np.asarray(q.block_keys, np.int64) for q in batch])
        offsets = np.concatenate([[0], np.cumsum([len(q.block_keys) for q in batch])]).astype(np.int64)
        segments.append(lane.process_batch(keys, offsets, np.zeros(len(batch), np.int64)).segments)
    lane.close()

    def curve() -> None:
        live = LiveCurve()
        for segs in segments:
            live.add(segs)

    t_query = best_of(repeat, queries)
    t_curve = best_of(repeat, curve)
    share = t_curve / max(t_query - t_curve, 1e-9)
    print(
        f"online: {len(pool):,} trace queries in {t_query:.2f} s, of which the live curve {t_curve:.3f} s: "
        f"+{share:.1%} over the rest of the query (target 20%: ratio {share / 0.2:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    args = parser.parse_args()
    bench_split(args.facts or ensure_facts(args.rows, args.cache_dir), args.repeat)
    bench_online_curve(args.repeat)
    bench_plan(args.repeat)
    print(f"(best of {args.repeat}, cpu count {os.cpu_count()})")


if __name__ == "__main__":
    main()
