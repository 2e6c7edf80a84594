"""``litehit replay``: run a replay from an original config file or from a trace + options."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from litehit.cli.commands import COMMAND_HELP
from litehit.cli.trace_input import add_trace_arguments, default_kv_note, spec_from_args
from litehit.lane_summary import parse_hit_rates, print_lane_summaries, summarize_facts
from litehit.publish import make_output_dir

if TYPE_CHECKING:
    from litehit.replay.result import ReplayResult

__all__ = ["add_parser", "print_summary"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help=COMMAND_HELP["replay"],
        description=(
            "Replay a KV-cache block trace once and publish capacity-independent facts.\n\n"
            "  litehit replay CONFIG.json\n"
            "      an original LiteHit offline config (trace_file_path, output_result_path,\n"
            "      instance_groups, instances, ...)\n"
            "  litehit replay TRACE [--format mooncake] [--block-sizes 512,1024] [--ttl-seconds 0,60] [-o DIR]\n"
            "      a trace file (plain, .gz or .zst); one lane per block size x TTL, all lanes see\n"
            "      every read (fanout). Formats: standard, mooncake, qwen_bailian, publisher_log.\n\n"
            "Prints, per lane, the hit rate at a ladder of capacities (powers of two up to the\n"
            "infinite-capacity plateau) and the capacity reaching 50/90/99% of the plateau.\n\n"
            "Then ask any capacity:  litehit query DIR/litehit_facts.csv --capacity-gb 1 2 4 -1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_arguments(p)
    p.add_argument(
        "-o",
        "--output",
        default="litehit-out",
        help="output directory, created if missing (default ./litehit-out)",
    )
    p.add_argument("--extended", action="store_true", help="add complete_blocks,cut_reason columns (miss attribution)")
    p.add_argument("--json", action="store_true", help="print the replay and its summary as one JSON object")
    p.add_argument(
        "--target-hit-rate",
        metavar="RATES",
        help="absolute hit rates, comma separated (e.g. 0.3,0.5): the smallest capacity reaching each",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.cli.run_kind import run_kind
    from litehit.jobs.replay import KIND

    hit_rates = parse_hit_rates(args.target_hit_rate) if args.target_hit_rate else []
    spec = spec_from_args(args, str(args.output))
    if args.extended:
        spec = spec.model_copy(update={"facts_format": "extended"})
    make_output_dir(spec.output_result_path)
    run, job_id = run_kind(KIND, spec, None, args, label="replay")
    result: ReplayResult = run.merged.value
    setups = {i.instance_id: (i.block_size, spec.group_of(i).ttl_seconds) for i in spec.instances}
    lanes = summarize_facts(
        result.curves if result.curves is not None and result.curves.kept else result.facts_path, setups, hit_rates
    )
    note = default_kv_note(args)
    if args.json:
        data = {**replay_as_dict(result), "job_id": job_id, "lanes": [lane.as_dict() for lane in lanes]}
        print(json.dumps({**data, "note": note} if note else data))
        return 0
    print_summary(result)
    print_lane_summaries(lanes, sys.stdout)
    if note:
        print(note)
    if job_id:
        print(f"job: {job_id} (litehit jobs)")
    return 0


def replay_as_dict(result: ReplayResult) -> dict[str, Any]:
    return {
        "facts_path": str(result.facts_path),
        "facts_rows": result.facts_rows,
        "trace_format": result.trace_format.value,
        "reads": result.reads,
        "blocks": result.blocks,
        "elapsed_s": result.elapsed_s,
        "engine": [
            {
                "instance_id": lane.instance_id,
                "requests": lane.requests,
                "blocks": lane.blocks,
                "unique_blocks": lane.unique_blocks,
                "expired_blocks": lane.expired_blocks,
                "memory_bytes": lane.memory_bytes,
                "shares_core_with": lane.shares_core_with,
            }
            for lane in result.lanes
        ],
    }


def print_summary(result: ReplayResult) -> None:
    rate = result.blocks / result.elapsed_s if result.elapsed_s > 0 else 0.0
    print(f"facts: {result.facts_path} ({result.facts_rows:,} rows)")
    print(
        f"trace: {result.trace_format.value}, {result.reads:,} reads, {result.blocks:,} blocks in "
        f"{result.elapsed_s:.2f} s ({rate / 1e6:.2f} M blocks/s)"
    )
    for lane in result.lanes:
        expired = f", {lane.expired_blocks:,} expired" if lane.expired_blocks else ""
        state = (
            f"engine state shared with lane {lane.shares_core_with}"
            if lane.shares_core_with is not None
            else f"{lane.memory_bytes / 2**20:.1f} MiB engine state"
        )
        print(
            f"  lane {lane.instance_id}: {lane.requests:,} requests, {lane.blocks:,} blocks, "
            f"{lane.unique_blocks:,} unique blocks alive{expired}, {state}"
        )
