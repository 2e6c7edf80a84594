"""Start-up: wall time of short `litehit` commands, process start included.

    python bench/bench_startup.py                    # 11 runs of each, medians
    python bench/bench_startup.py --runs 21

Each command runs --runs times as a fresh process of the installed console script (the
interpreter beside this one), output discarded, with its own LiteHit home (so every run of a
query is recorded, as a user's is, and the next run starts once that recording has committed);
the figure is the median wall time, min and max beside it.
The 1,000-row facts file is the first 1,000 requests of the bundled conversation trace's replay.
`--record off` runs the query with LITEHIT_RECORD_JOBS=0: what recording (in a forked child,
after the answer) still costs the command. The issue's targets: --version and --help <= 0.15 s,
a query of 1,000 facts rows <= 0.4 s; ratio = target / measured (>= 1 meets it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from litehit.jobs.records import wait_for_records

ROOT = Path(__file__).resolve().parents[1]
LITEHIT = str(Path(sys.executable).with_name("litehit"))
TRACE = ROOT / "examples" / "data" / "conversation_trace.jsonl"


def facts_rows(rows: int, folder: Path) -> Path:
    env = {**os.environ, "LITEHIT_HOME": str(folder / "home"), "LITEHIT_RECORD_JOBS": "0"}
    subprocess.run(
        [LITEHIT, "replay", str(TRACE), "-o", str(folder / "replay")], env=env, check=True, capture_output=True
    )
    lines = (folder / "replay" / "litehit_facts.csv").read_bytes().splitlines(keepends=True)
    if len(lines) <= rows:
        raise SystemExit(f"the bundled replay has only {len(lines) - 1} rows")
    path = folder / f"facts_{rows}.csv"
    path.write_bytes(b"".join(lines[: rows + 1]))
    return path


def wall(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall times of `runs` runs; between runs (untimed) it waits for the run's recording child,
    so no run shares the cores with the previous run's recording (a user's next command would)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        wait_for_records()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        facts = facts_rows(args.rows, folder)
        env = {**os.environ, "LITEHIT_HOME": str(folder / "home")}
        subprocess.run([LITEHIT, "migrate"], env=env, check=True, capture_output=True)
        query = [LITEHIT, "query", str(facts), "--capacity", "0.5", "1", "-1"]
        cases = [
            ("litehit --version", [LITEHIT, "--version"], env, 0.15),
            ("litehit --help", [LITEHIT, "--help"], env, 0.15),
            (f"litehit query ({args.rows:,} rows, 3 capacities)", query, env, 0.4),
            (f"litehit query ({args.rows:,} rows), --record off", query, {**env, "LITEHIT_RECORD_JOBS": "0"}, None),
        ]
        print(f"{'command':44} {'median':>8} {'min':>7} {'max':>7}   target  ratio")
        for name, argv, case_env, target in cases:
            times = wall(argv, case_env, args.runs)
            median = statistics.median(times)
            goal = f"{target:6.2f} s {target / median:5.2f}x" if target else ""
            print(f"{name:44} {median:7.3f}s {min(times):6.3f}s {max(times):6.3f}s   {goal}")
        jobs = subprocess.run(
            [LITEHIT, "jobs", "--kind", "query", "--limit", str(args.runs + 10)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        recorded = len(jobs.stdout.splitlines()) - 1
        print(f"query runs recorded (litehit jobs --kind query): {recorded} of {args.runs}")


if __name__ == "__main__":
    main()
