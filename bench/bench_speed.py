"""Speed where users feel it (issue 25): every target with the ratio measured in this one run.

    python bench/bench_speed.py                        # 20M blocks, 2 rounds
    python bench/bench_speed.py --blocks 5000000 --repeat 1

1. Start-up (bench_startup.py's measurement): --version, --help and a query of 1,000 facts rows,
   medians of --runs fresh processes. Targets: <= 0.15 s, <= 0.15 s, <= 0.4 s.
2. Replay against the reference loop: `litehit replay` of bench/kvtrace.py's Mooncake JSONL
   (one 512-token lane, --workers 2, process start included), and bench/ref_stack_distance.c
   (the textbook stack-distance loop, compiled here with `cc -O3 -march=native`, timed alone over
   the same keys already in memory, written to a file by a child process). Target: replay speed
   >= 1.5x the loop's; peak RSS <= 200 MiB.
3. Analyses against the replay, end to end on the same trace: `litehit profile`, `litehit window`
   (lru at --capacity-gb) and `litehit policies --policies lru,fifo` (same capacity). Target: each
   >= 0.8x the replay's speed.
4. The simulator alone (core_c.PolicySim, one core, capacity a quarter of the distinct keys, as
   bench_policies.py): gdfs and wa against lru, the three taken in turn each round. Target: >= 0.5x.
5. Fan-out: two lanes in one process against one lane, blocks replayed per second summed over
   lanes (each lane's own count, from the printed summary). Target: >= 1.7x, for two lanes that
   each replay the whole trace (--ttl-seconds 0,N with N longer than the trace: the second lane
   expires nothing). Such lanes see the same requests and differ only in TTL, so in process they
   share one lane core, a TTL view each (litehit.replay.lanes.SharedLanes): one key map and one
   LRU order for both, the second lane's own work being its TTL bookkeeping and its facts rows.
   Also printed: --block-sizes 512,1024, lanes that cannot share a core, whose 1024-token lane
   replays about half the blocks: that run does the one-lane run's work and more on the same
   cores, so it stays below 1.5x by construction (no target); the cores one lane's replay keeps
   busy (its CPU seconds over its wall seconds), and the ceiling that leaves two lanes that do
   not share a core if every stage doubled (cores / that; the parse is shared, so two such
   lanes may pass it); and two reference loops run at once in two processes against one: what
   the machine's cores give two independent jobs of this kind (on the 2-vCPU VMs of this
   project 1.32-1.93x over 20 M keys across runs, whose tables live in memory, against 2.0x over
   300 K keys, whose tables fit in the caches; a busy loop on one vCPU slowed the lane core on
   the other by a third).
6. Fan-out on the service (bench_fanout_service.py's measurement over this trace): two local
   stacks at once (each uvicorn + a Celery worker, PostgreSQL and Redis on 127.0.0.1, free ports, a
   database and a queue of its own), one with one worker process replaying one lane, one with two
   replaying two lanes that see the same blocks (one task runs both on one lane core, as in
   process); submit to succeeded, staging and merge included, the two jobs in turn in each of
   --repeat rounds. Target: lane-blocks per second >= 1.7x. Skipped, and said so, when PostgreSQL
   or Redis does not answer (--no-service: not run).

Ratios are speed ratios (>= 1 beats the reference). The commands of 2, 3 and 5 (and the reference
loops) run once in each of --repeat rounds, in turn, in reverse order every other round; each ratio
is taken within a round, between commands timed close together, and the median over the rounds is
judged, their range printed beside it ("rounds"). This VM has slow phases lasting many seconds: a
ratio of two commands' best times over all rounds (this bench's method before 2026-12-07's eighth
session) could compare two phases of the machine rather than two programs. The speeds printed are
the best round's; 4 takes its three simulators in turn in each round, its ratios likewise, and so
does 6 with its two jobs (before the day's eleventh session of 2026-12-07, 6 compared the best of
--repeat on each stack, the stacks one after the other). Every child process runs with recording off
(LITEHIT_RECORD_JOBS=0) in a private home.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_replay import ensure_trace
from bench_startup import facts_rows, wall
from kvtrace import generate

import core_c

HERE = Path(__file__).resolve().parent
TTL_BEYOND_TRACE_S = 10**7  # 116 days: the 20 M-block trace of kvtrace.py spans 41 hours
LITEHIT = str(Path(sys.executable).with_name("litehit"))


class Table:
    def __init__(self) -> None:
        print(f"{'what':58} {'measured':>22} {'target':>10} {'ratio':>7} {'rounds':>11}")

    def row(
        self, what: str, measured: str, target: str, ratio: float | None, meets: bool | None, rounds: str = ""
    ) -> None:
        verdict = "" if meets is None else ("  ok" if meets else "  BELOW")
        shown = f"{ratio:6.2f}x" if ratio is not None else ""
        print(f"{what:58} {measured:>22} {target:>10} {shown:>7} {rounds:>11}{verdict}", flush=True)

    def paired(self, what: str, measured: str, goal: float | None, ratios: list[float]) -> None:
        """A ratio measured in every round: the median over the rounds, judged; their range shown."""
        median = float(np.median(ratios))
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else ""
        target = f">= {goal}x" if goal is not None else ""
        self.row(what, measured, target, median, median >= goal if goal is not None else None, spread)


def timed(cmd: list[str], env: dict[str, str], stdout: Path | None = None) -> tuple[float, float, float]:
    """(seconds, peak RSS in MiB, CPU seconds: user + system) of a child process that must succeed
    (its output to stdout, or discarded)."""
    with open(stdout if stdout is not None else os.devnull, "wb") as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def lane_blocks(summary: str) -> int:
    """The blocks every lane replayed, summed, from a replay's printed summary ("lane b512: 301,701
    requests, 20,000,007 blocks, ..."): a 1024-token lane of a 512-token trace has about half."""
    found = re.findall(r"^  lane \S+: [\d,]+ requests, ([\d,]+) blocks", summary, flags=re.M)
    if not found:
        raise SystemExit("the replay's summary names no lane")
    return sum(int(n.replace(",", "")) for n in found)


class ReferenceLoop:
    """bench/ref_stack_distance.c compiled here, over the trace's keys written to a file by a child
    process (a child forked from a process holding them would count their pages in its peak RSS)."""

    def __init__(self, blocks: int, folder: Path) -> None:
        cc = shutil.which(os.environ.get("CC", "cc")) or "gcc"
        self.binary = folder / "ref_stack_distance"
        subprocess.run(
            [cc, "-O3", "-march=native", "-o", str(self.binary), str(HERE / "ref_stack_distance.c")], check=True
        )
        self.path = folder / "keys.bin"
        write = (
            "import sys; sys.path.insert(0, sys.argv[1]); from kvtrace import generate; t = generate(int(sys.argv[2]));"
            " t.keys[: int(t.offsets[-1])].astype('<i8').tofile(sys.argv[3]); print(int(t.offsets[-1]))"
        )
        out = subprocess.run(
            [sys.executable, "-c", write, str(HERE), str(blocks), str(self.path)],
            capture_output=True,
            text=True,
            check=True,
        )
        self.keys = int(out.stdout)

    def _seconds(self, out: str) -> float:
        words = out.split()
        if int(words[0]) != self.keys:
            raise SystemExit(f"the reference loop read {words[0]} keys, not {self.keys}")
        return float(words[4])

    def alone(self) -> float:
        """Seconds of the loop over the keys (its file read before the clock starts)."""
        out = subprocess.run([str(self.binary), str(self.path)], capture_output=True, text=True, check=True).stdout
        return self._seconds(out)

    def two_at_once(self) -> float:
        """Seconds of the slower of two loops run at once in two processes: what the machine's
        cores give two independent CPU-bound jobs, whatever LiteHit does."""
        pair = [
            subprocess.Popen([str(self.binary), str(self.path)], stdout=subprocess.PIPE, text=True) for _ in range(2)
        ]
        outs = [p.communicate()[0] for p in pair]
        if any(p.returncode != 0 for p in pair):
            raise SystemExit("the reference loop failed")
        return max(self._seconds(out) for out in outs)


def simulator_rates(policies: list[str], trace: object, capacity: int, repeat: int) -> list[dict[str, float]]:
    """Blocks per second of each policy's simulator alone in each of repeat rounds, the policies
    taken in turn in every round (as the commands above: a slow phase of the VM then slows them all)."""
    keys, offsets, ts = trace.keys, trace.offsets, trace.timestamps_ms * 50_000_000  # type: ignore[attr-defined]
    n = len(offsets) - 1
    categories = (np.arange(n) % 4).astype(np.int32)
    rounds = []
    for _ in range(repeat):
        rates = {}
        for policy in policies:
            with core_c.PolicySim(policy, capacity, wa_refit_s=600.0, wa_fit_window_s=3600.0) as sim:
                elapsed = 0.0
                for lo in range(0, n, 20_000):
                    hi = min(n, lo + 20_000)
                    o = offsets[lo : hi + 1]
                    t0 = time.perf_counter()
                    sim.process_batch(keys[o[0] : o[-1]], o - o[0], ts[lo:hi], categories[lo:hi])
                    elapsed += time.perf_counter() - t0
            rates[policy] = int(offsets[-1]) / elapsed
        rounds.append(rates)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per start-up figure")
    parser.add_argument("--capacity-gb", default="256")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "litehit-bench")
    parser.add_argument("--no-service", action="store_true", help="skip the service's fan-out (6)")
    args = parser.parse_args()

    trace_path = ensure_trace(args.blocks, args.cache_dir)
    print(f"trace: {trace_path} ({trace_path.stat().st_size / 2**20:.0f} MiB, {args.blocks:,} full blocks)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "LITEHIT_HOME": str(folder / "home"), "LITEHIT_RECORD_JOBS": "0"}
        table = Table()

        facts = facts_rows(1000, folder)
        for name, argv, goal in [
            ("litehit --version", [LITEHIT, "--version"], 0.15),
            ("litehit --help", [LITEHIT, "--help"], 0.15),
            ("litehit query, 1,000 facts rows", [LITEHIT, "query", str(facts), "--capacity", "0.5", "1", "-1"], 0.4),
        ]:
            median = float(np.median(wall(argv, env, args.runs)))
            table.row(
                f"{name} (median of {args.runs})", f"{median:.3f} s", f"<= {goal} s", goal / median, median <= goal
            )

        common = [str(trace_path), "--format", "mooncake", "--workers", "2"]
        capacity = ["--capacity-gb", args.capacity_gb]
        commands = {
            "replay": [LITEHIT, "replay", *common, "-o", str(folder / "r1")],
            "litehit profile": [LITEHIT, "profile", *common, "-o", str(folder / "profile.json")],
            "litehit window (lru)": [LITEHIT, "window", *common, *capacity, "-o", str(folder / "window.json")],
            "litehit policies --policies lru,fifo": [
                LITEHIT, "policies", *common, *capacity, "--policies", "lru,fifo"
            ],
            "two lanes": [
                LITEHIT, "replay", *common, "--ttl-seconds", f"0,{TTL_BEYOND_TRACE_S}", "-o", str(folder / "r2")
            ],
            "two block sizes": [LITEHIT, "replay", *common, "--block-sizes", "512,1024", "-o", str(folder / "r3")],
        }  # fmt: skip
        loop = ReferenceLoop(args.blocks, folder)
        # Each round times every command once, the commands in turn, in reverse order every other
        # round, the reference loops just after the replay (just before it in reverse). The VM has
        # slow phases that last many seconds, so each ratio is taken within a round, between
        # commands timed close together, and the median over the rounds is judged: a ratio of two
        # commands' best times could compare two phases of the machine, not two programs.
        seconds: dict[str, list[float]] = {name: [] for name in [*commands, "loop", "two loops"]}
        rss = dict.fromkeys(commands, 0.0)
        cpu = dict.fromkeys(commands, 0.0)  # of the fastest run
        order = ["replay", "loop", "two loops", *list(commands)[1:]]
        for r in range(args.repeat):
            for name in order if r % 2 == 0 else order[::-1]:
                if name == "loop":
                    seconds[name].append(loop.alone())
                    continue
                if name == "two loops":
                    seconds[name].append(loop.two_at_once())
                    continue
                t, m, c = timed(commands[name], env, folder / f"{name}.out")
                if t < min(seconds[name], default=float("inf")):
                    cpu[name] = c
                seconds[name].append(t)
                rss[name] = max(rss[name], m)
        replay = seconds["replay"]
        replay_s, replay_rss = min(replay), rss["replay"]
        blocks = args.blocks  # (the generator ends the last request: a few more blocks than asked)

        def per_round(name: str) -> list[float]:
            """The replay's time over name's, round by round: name's speed against the replay's."""
            return [a / b for a, b in zip(replay, seconds[name], strict=True)]

        table.row("litehit replay peak RSS", f"{replay_rss:.0f} MiB", "<= 200 MiB", 200 / replay_rss, replay_rss <= 200)
        for name in ("litehit profile", "litehit window (lru)", "litehit policies --policies lru,fifo"):
            table.paired(
                f"{name} vs the replay (peak RSS {rss[name]:.0f} MiB)",
                f"{blocks / min(seconds[name]) / 1e6:.2f} M blocks/s",
                0.8,
                per_round(name),
            )
        one = lane_blocks((folder / "replay.out").read_text())
        alive = re.findall(
            r"^  lane \S+: .* ([\d,]+) unique blocks alive", (folder / "two lanes.out").read_text(), re.M
        )
        if len(alive) != 2 or alive[0] != alive[1]:
            raise SystemExit(f"the TTL lane expired blocks ({alive}): raise TTL_BEYOND_TRACE_S above the trace's span")
        fanout_rows: list[tuple[str, str, float | None]] = [
            ("two lanes", "two whole lanes (TTL 0 and beyond the trace)", 1.7),
            ("two block sizes", "two lanes, --block-sizes 512,1024", None),
        ]
        for name, label, goal in fanout_rows:
            both = lane_blocks((folder / f"{name}.out").read_text())
            fanouts = [both / one * ratio for ratio in per_round(name)]  # lane-blocks per second, two over one
            if goal is not None:
                table.paired(
                    f"{label} vs one lane ({both / one:.2f}x the blocks)",
                    f"{both / min(seconds[name]) / 1e6:.2f} M blocks/s",
                    goal,
                    fanouts,
                )
            else:
                table.row(
                    f"{label} vs one lane ({both / one:.2f}x the blocks)",
                    f"{both / min(seconds[name]) / 1e6:.2f} M blocks/s",
                    f"< {both / one:.2f}x",
                    float(np.median(fanouts)),
                    None,
                    f"{min(fanouts):.2f}-{max(fanouts):.2f}" if len(fanouts) > 1 else "",
                )
        busy = cpu["replay"] / replay_s
        table.row(
            f"one lane's replay keeps {busy:.2f} of the {os.cpu_count()} cores busy (CPU s / wall s)",
            f"ceiling {(os.cpu_count() or 1) / busy:.2f}x for two lanes not sharing a core",
            "",
            None,
            None,
        )
        loops = seconds["loop"]
        table.row(
            "reference loop alone (keys in memory)", f"{blocks / min(loops) / 1e6:.2f} M blocks/s", "", None, None
        )
        table.paired(
            "two reference loops at once, two processes, vs one (the cores' own scaling)",
            f"{2 * blocks / min(seconds['two loops']) / 1e6:.2f} M blocks/s",
            None,
            [2 * a / b for a, b in zip(loops, seconds["two loops"], strict=True)],
        )
        table.paired(
            "litehit replay end to end vs the reference loop",
            f"{blocks / replay_s / 1e6:.2f} M blocks/s",
            1.5,
            [a / b for a, b in zip(loops, replay, strict=True)],
        )

        # The trace's keys in this process only now: a child forked from a large process would
        # count the parent's pages in its peak RSS.
        trace = generate(args.blocks)  # the keys of trace_path, in the same order
        distinct = len(np.unique(trace.keys[: int(trace.offsets[-1])]))
        quarter = max(1, distinct // 4)
        rounds = simulator_rates(["lru", "gdfs", "wa"], trace, quarter, args.repeat)
        best = {policy: max(r[policy] for r in rounds) for policy in ("lru", "gdfs", "wa")}
        table.row("simulator lru, capacity 25 % of the keys", f"{best['lru'] / 1e6:.2f} M blocks/s", "", None, None)
        for policy in ("gdfs", "wa"):
            table.paired(
                f"simulator {policy} vs lru",
                f"{best[policy] / 1e6:.2f} M blocks/s",
                0.5,
                [r[policy] / r["lru"] for r in rounds],
            )
        if not args.no_service:
            service_fanout(table, trace_path, one, args.repeat)


def service_fanout(table: Table, trace_path: Path, blocks: int, repeat: int) -> None:
    """6: two lanes on the service with two worker processes against one lane with one."""
    missing = [name for name, port in (("PostgreSQL", 5432), ("Redis", 6379)) if not answers(port)]
    if missing:
        table.row(f"service fan-out: skipped, no {' or '.join(missing)} on 127.0.0.1", "", ">= 1.7x", None, None)
        return
    from bench_fanout_service import CONFIG, run_replay, two_lanes
    from bench_service import local_stack

    trace = trace_path.read_bytes()
    seconds: dict[int, list[float]] = {1: [], 2: []}
    # Both stacks up at once, their jobs taken in turn (in reverse order every other round), each
    # ratio taken within a round as for the commands above: one stack timed after the other could
    # compare two phases of the machine. An idle stack waits on its sockets.
    with (
        local_stack(worker_concurrency=1, quiet=True, name="litehit_bench") as one_url,
        local_stack(worker_concurrency=2, quiet=True, name="litehit_bench_two") as two_url,
    ):
        jobs = [(1, one_url, CONFIG), (2, two_url, two_lanes())]
        for r in range(repeat):
            for lanes, url, config in jobs if r % 2 == 0 else jobs[::-1]:
                seconds[lanes].append(run_replay(url, trace, config)[0])
    table.row("service: one lane on 1 worker process (submit -> succeeded)", f"{min(seconds[1]):.2f} s", "", None, None)
    table.paired(
        "service: two lanes on 2 worker processes vs one lane on 1",
        f"{2 * blocks / min(seconds[2]) / 1e6:.2f} M blocks/s",
        1.7,
        [2 * a / b for a, b in zip(seconds[1], seconds[2], strict=True)],
    )


def answers(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    main()
