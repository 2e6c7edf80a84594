"""``litehit replay``: run a replay from an original config file or from a trace + options."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.spec import ReplaySpec, TraceFormat, load_replay_config, parse_replay_spec
from litehit.traces.formats import detect_format

if TYPE_CHECKING:
    from litehit.replay.runner import ReplayResult

__all__ = ["add_parser", "shorthand_config"]

DEFAULT_TRACE_BLOCK = {
    TraceFormat.MOONCAKE: 512,
    TraceFormat.QWEN_BAILIAN: 16,
    TraceFormat.PUBLISHER_LOG: 16,
    TraceFormat.STANDARD: 256,
}
DEFAULT_BYTES_PER_TOKEN = 2048  # 1 MiB per 512-token block


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a trace once and publish its facts (litehit_facts.csv)",
        description=(
            "Replay a KV-cache block trace once and publish capacity-independent facts.\n\n"
            "  litehit replay CONFIG.json\n"
            "      an original LiteHit offline config (trace_file_path, output_result_path,\n"
            "      instance_groups, instances, ...)\n"
            "  litehit replay TRACE [--format mooncake] [--block-sizes 512,1024] [--ttl-seconds 0,60] [-o DIR]\n"
            "      a trace file (plain, .gz or .zst); one lane per block size x TTL, all lanes see\n"
            "      every read (fanout). Formats: standard, mooncake, qwen_bailian, publisher_log.\n\n"
            "Then ask any capacity:  litehit query DIR/litehit_facts.csv --capacity-gb 1 2 4 -1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="an offline config JSON file, or a trace file")
    p.add_argument("--format", choices=[f.value for f in TraceFormat], help="trace format (default: detected)")
    p.add_argument(
        "--block-size",
        type=int,
        help="tokens per block of the trace (default: 512 mooncake, 16 qwen_bailian/publisher_log, 256 standard)",
    )
    p.add_argument(
        "--block-sizes",
        help="analysis block sizes, comma separated multiples of --block-size (default: --block-size)",
    )
    p.add_argument(
        "--ttl-seconds",
        default="0",
        help="fixed TTL per lane group, comma separated; 0 = pure LRU (default 0)",
    )
    p.add_argument("--block-bytes", type=int, help="KV-cache bytes of one trace block (default: 2048 bytes per token)")
    p.add_argument(
        "--prefix-hash",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="chain per-block hashes into prefix keys (default: on for qwen_bailian only)",
    )
    p.add_argument(
        "-o",
        "--output",
        default="litehit-out",
        help="output directory, created if missing (default ./litehit-out)",
    )
    p.add_argument("--workers", type=int, default=None, help="parsing threads (pipeline_worker_count)")
    p.add_argument("--extended", action="store_true", help="add complete_blocks,cut_reason columns (miss attribution)")
    p.set_defaults(func=_run)


def _is_config(path: Path) -> bool:
    """A config is a regular file holding one JSON object with config fields (a trace is JSONL,
    possibly compressed, possibly a pipe that must not be read here)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(1 << 20)
        data = json.loads(head)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool({"instances", "instance_groups", "trace_file_path"} & data.keys())


def shorthand_config(args: argparse.Namespace) -> dict[str, Any]:
    """The original config that the shorthand options stand for."""
    fmt = TraceFormat(args.format) if args.format else detect_format(args.source)
    if fmt is None:
        raise SystemExit(f"litehit: error: {args.source}: the trace has no rows")
    trace_bs = args.block_size or DEFAULT_TRACE_BLOCK[fmt]
    sizes = [int(x) for x in args.block_sizes.split(",")] if args.block_sizes else [trace_bs]
    ttls = [int(x) for x in str(args.ttl_seconds).split(",")]
    groups, instances = [], []
    for ttl in ttls:
        group: dict[str, Any] = {"name": f"ttl{ttl}", "ttl_seconds": ttl}
        if args.prefix_hash is not None:
            group["enable_prefix_hash"] = args.prefix_hash
        groups.append(group)
        for bs in sizes:
            block_bytes = (args.block_bytes or trace_bs * DEFAULT_BYTES_PER_TOKEN) * bs // trace_bs
            instances.append(
                {
                    "instance_group_name": group["name"],
                    "instance_id": f"b{bs}" + (f"_ttl{ttl}" if ttl else ""),
                    "block_size": bs,
                    "location_spec_infos": [{"name": "kv", "size": block_bytes}],
                    "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
                    "optimizer_state_info": {"full_location_spec_group_name": "full"},
                }
            )
    config: dict[str, Any] = {
        "trace_file_path": str(args.source),
        "output_result_path": str(args.output),
        "block_size": trace_bs,
        "trace_format": fmt.value,
        "instance_groups": groups,
        "instances": instances,
        "pipeline_worker_count": args.workers or 2,
        "facts_format": "extended" if args.extended else "standard",
    }
    if len(instances) > 1:
        config["fanout_all_instances"] = True
    else:
        config["override_instance_id"] = instances[0]["instance_id"]
    return config


def _run(args: argparse.Namespace) -> int:
    from litehit.cli.run_record import JobRecorder  # SQLAlchemy loads only for commands that record

    source = Path(args.source)
    if not args.format and _is_config(source):
        shorthand = [
            o for o in ("format", "block_size", "block_sizes", "block_bytes", "prefix_hash") if getattr(args, o)
        ]
        if shorthand:
            raise SystemExit(
                f"litehit: error: --{shorthand[0].replace('_', '-')} cannot be combined with a config file"
            )
        spec = load_replay_config(source)
        if args.workers:
            spec = spec.model_copy(update={"pipeline_worker_count": args.workers})
        if args.extended:
            spec = spec.model_copy(update={"facts_format": "extended"})
    else:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        spec = parse_replay_spec(shorthand_config(args))
    for name in spec.unknown_fields():
        print(f"litehit: warning: ignoring unknown config field {name}", file=sys.stderr)
    with JobRecorder("replay", spec.model_dump(mode="json")) as record:
        result = replay_with_progress(spec)
        record.replay_succeeded(result)
    print_summary(result)
    if record.job_id:
        print(f"job: {record.job_id} (litehit jobs)")
    return 0


def replay_with_progress(spec: ReplaySpec) -> ReplayResult:
    from litehit.cli.progress import ProgressReporter
    from litehit.replay.runner import run_replay

    reporter = ProgressReporter()
    try:
        return run_replay(spec, on_progress=reporter)
    finally:
        reporter.finish()


def print_summary(result: ReplayResult) -> None:
    rate = result.blocks / result.elapsed_s if result.elapsed_s > 0 else 0.0
    print(f"facts: {result.facts_path} ({result.facts_rows:,} rows)")
    print(
        f"trace: {result.trace_format.value}, {result.reads:,} reads, {result.blocks:,} blocks in "
        f"{result.elapsed_s:.2f} s ({rate / 1e6:.2f} M blocks/s)"
    )
    for lane in result.lanes:
        expired = f", {lane.expired_blocks:,} expired" if lane.expired_blocks else ""
        print(
            f"  lane {lane.instance_id}: {lane.requests:,} requests, {lane.blocks:,} blocks, "
            f"{lane.unique_blocks:,} unique blocks alive{expired}, {lane.memory_bytes / 2**20:.1f} MiB engine state"
        )
