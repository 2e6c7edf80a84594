"""``litehit demo``: the main job on embedded defaults, no servers: replay the bundled Mooncake
conversation trace once, then answer capacity questions from its facts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from litehit.cli.commands import COMMAND_HELP
from litehit.errors import ConfigError, ConfigIssue

__all__ = ["BUNDLED_TRACE", "add_parser"]

BUNDLED_TRACE = Path(__file__).resolve().parents[2] / "examples" / "data" / "conversation_trace.jsonl"
CAPACITIES = ["0.5", "1", "2", "4", "8", "16", "32", "-1"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help=COMMAND_HELP["demo"],
        description=(
            "Replays examples/data/conversation_trace.jsonl once (lanes: 512- and 1024-token blocks,\n"
            "pure LRU and a 60 s TTL, 2 KiB of KV cache per token), then queries capacities, computes\n"
            "the exact hit-rate curves and draws plots, all from the one set of facts."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trace", type=Path, default=BUNDLED_TRACE, help="a Mooncake-format trace (default: bundled)")
    p.add_argument("-o", "--output", type=Path, default=Path("litehit-demo"), help="output directory")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.capacity import parse_capacities
    from litehit.cli.analysis import print_curve_summary
    from litehit.cli.query import print_table
    from litehit.cli.replay import print_summary
    from litehit.cli.run_kind import run_kind
    from litehit.cli.trace_input import default_kv_note, lane_legend, shorthand_config
    from litehit.curve import exact_curves
    from litehit.jobs.kinds import Kind
    from litehit.jobs.query import QueryJobSpec
    from litehit.jobs.records import JobRecorder
    from litehit.jobs.replay import KIND as REPLAY
    from litehit.plots import plot_facts
    from litehit.publish import AtomicPublisher, make_output_dir
    from litehit.query import query_facts
    from litehit.spec import parse_replay_spec

    if not args.trace.exists():
        raise ConfigError([ConfigIssue("--trace", str(args.trace), "trace not found (pass --trace PATH)")])
    make_output_dir(args.output)
    ns = argparse.Namespace(
        source=str(args.trace),
        format="mooncake",
        block_size=512,
        block_sizes="512,1024",
        ttl_seconds="0,60",
        block_bytes=None,
        prefix_hash=None,
        workers=2,
        extended=True,
    )
    note = default_kv_note(ns)
    print(f"1. replay {args.trace} once -> capacity-independent facts")
    spec = parse_replay_spec(shorthand_config(ns, str(args.output)))
    run, replay_job = run_kind(REPLAY, spec, None, ns, label="replay")
    result = run.merged.value
    print_summary(result)
    print(f"   {lane_legend(spec)}")
    facts = result.facts_path
    print(f"\n2. query the facts at {' '.join(CAPACITIES)} GiB (-1 = infinite)")
    query_out = args.output / "query.jsonl"
    slots = parse_capacities(CAPACITIES)
    query = QueryJobSpec(capacity_gb=[s.recorded_gb for s in slots], targets=[], facts_path=str(facts.resolve()))
    with JobRecorder(Kind.QUERY, query.model_dump(mode="json")) as record:
        with AtomicPublisher(query_out) as out:
            summary = query_facts(facts, slots, out)
            out.commit()
        record.query_succeeded(summary, str(query_out.resolve()))
    print_table(summary)
    print(f"   per-request rows: {query_out}")
    print("   (total: every lane added up, as the original query reports it; lanes of different block sizes or")
    print("   TTLs ask different questions: compare them lane by lane)")
    print("\n3. the exact hit-rate curve over all capacities")
    print_curve_summary(exact_curves(facts))
    print("\n4. plots")
    for path in plot_facts(facts, args.output / "plots", capacities=parse_capacities(["1", "4", "16"])):
        print(f"   {path}")
    if note:
        print(f"\n{note}")
    jobs = [j for j in (replay_job, record.job_id) if j]
    if jobs:
        print(f"jobs: {', '.join(jobs)} (litehit jobs)")
    return 0
