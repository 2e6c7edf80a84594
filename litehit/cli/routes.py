"""``litehit routes``: the hit rate and load balance N replicas would get under each request router,
from one pass over the trace (the routes job's functions, in process)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from litehit.cli.commands import COMMAND_HELP
from litehit.cli.trace_input import add_trace_arguments, default_kv_note, spec_from_args
from litehit.errors import ConfigError, ConfigIssue

__all__ = ["add_parser", "print_routes"]

ROUTERS = "round_robin,random,session,prefix_hash"
ALL_ROUTERS = f"{ROUTERS},least_loaded,cache_aware"
_FLAGS = {
    "replicas": "--replicas",
    "routers": "--routers",
    "capacities": "--capacity",
    "seed": "--seed",
    "prefix_blocks": "--prefix-blocks",
    "load_window_s": "--load-window-s",
    "balance_threshold": "--balance-threshold",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "routes",
        help=COMMAND_HELP["routes"],
        description=(
            "Route every request of the trace to one of N identical replicas (the trace's instance ids\n"
            "are ignored; block size, prefix hash, TTL and model bytes apply per replica) under each\n"
            "router, replay every replica exactly, and report the hit rate and load imbalance at each\n"
            "per-replica capacity, and the exact curve over all of them.\n\n"
            f"  litehit routes TRACE --replicas 8 [--routers {ALL_ROUTERS}]\n"
            "      [--capacity 4GiB 20000blocks inf] [--seed 0] [--prefix-blocks 1] [--load-window-s 10]\n"
            "      [--balance-threshold 0.1] [-o routes.json] [--plot routes.png]\n\n"
            "round_robin: request i to replica i mod N. random: SplitMix64(seed) output i mod N.\n"
            "session: the root session mod N (qwen_bailian: chat_id chained by parent_chat_id; other\n"
            "formats: the first trace key). prefix_hash: the lane key of block --prefix-blocks\n"
            "mod N. Each of these router's per-replica facts are published beside routes.json\n"
            "(routes_<router>_facts.csv, lanes r0..r{N-1}): litehit query, curve and tiers read them.\n"
            "least_loaded and cache_aware read the replicas' state (load = prefill tokens routed in the\n"
            "last --load-window-s seconds; cache_aware: the longest resident prefix, unless its load is\n"
            "above (1 + --balance-threshold) x the mean): simulated at each --capacity (LRU replicas)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_arguments(p, source_required=False)  # --schema needs no trace
    p.add_argument("--replicas", type=int, metavar="N", help="replicas in the pool (1 .. 1024; required)")
    p.add_argument("--routers", default=ROUTERS, help=f"comma separated, of {ALL_ROUTERS} (default: {ROUTERS})")
    p.add_argument("--capacity", nargs="+", default=[], metavar="CAP",
                   help="per-replica capacities: GiB (1, 512MiB), 20000blocks, 1Mtokens or inf")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random router (default 0)")
    p.add_argument("--prefix-blocks", type=int, default=1, metavar="K", help="prefix_hash: the first K blocks")
    p.add_argument("--load-window-s", type=float, default=10.0, metavar="S",
                   help="the load window of least_loaded and cache_aware and of the p99 imbalance, seconds "
                        "(default 10)")  # fmt: skip
    p.add_argument("--balance-threshold", type=float, default=0.1, metavar="T",
                   help="cache_aware: least-loaded instead above (1 + T) x the mean load (default 0.1)")  # fmt: skip
    p.add_argument("-o", "--output", type=Path, default=Path("routes.json"),
                   help="routes.json here (default ./routes.json); the facts files go beside it")  # fmt: skip
    p.add_argument("--plot", type=Path, help="draw the curves and the imbalance here (.png or .svg)")
    p.add_argument("--schema", action="store_true", help="print the JSON schema of routes.json and exit")
    p.set_defaults(func=_run)


def parse_options(args: argparse.Namespace) -> Any:
    """The routes options of a command line; errors name the flag and the value."""
    from pydantic import ValidationError

    from litehit.routes.options import RoutesOptions

    for flag, value in (("--block-sizes", args.block_sizes), ("--ttl-seconds", args.ttl_seconds)):
        if value is not None and len([v for v in str(value).split(",") if v.strip()]) > 1:
            raise ConfigError([ConfigIssue(flag, value, "routes replicates one instance: give one value")])
    data = {
        "replicas": args.replicas,
        "routers": [r.strip() for r in args.routers.split(",") if r.strip()],
        "capacities": list(args.capacity),
        "seed": args.seed,
        "prefix_blocks": args.prefix_blocks,
        "load_window_s": args.load_window_s,
        "balance_threshold": args.balance_threshold,
    }
    try:
        return RoutesOptions.model_validate(data)
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "routers"
            cause = (error.get("ctx") or {}).get("error")
            message = str(cause) if cause is not None else error["msg"]
            message = message.removeprefix("Value error, ")
            issues.append(ConfigIssue(_FLAGS.get(field, "--" + field.replace("_", "-")), data.get(field), message))
        raise ConfigError(issues[:1]) from None


def _run(args: argparse.Namespace) -> int:
    from litehit.cli.run_kind import run_kind
    from litehit.jobs.routes import KIND, document_bytes, routed_runtime

    if args.schema:
        import json

        from litehit.routes.result import RoutesResult

        if args.source is not None:
            raise ConfigError([ConfigIssue("TRACE", args.source, "--schema takes no trace")])
        print(json.dumps(RoutesResult.model_json_schema(), indent=2))
        return 0
    if args.source is None:
        raise ConfigError([ConfigIssue("TRACE", None, "a trace or config file is required (or --schema)")])
    if args.replicas is None:
        raise ConfigError([ConfigIssue("--replicas", None, "how many replicas the pool has is required (1 .. 1024)")])
    options = parse_options(args)
    if args.plot is not None and args.plot.suffix not in {".png", ".svg"}:
        raise ConfigError([ConfigIssue("--plot", str(args.plot), "a plot file ends in .png or .svg")])
    if args.output.suffix != ".json":
        raise ConfigError([ConfigIssue("--output", str(args.output), "routes.json ends in .json")])
    folder = args.output.resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue("--output", str(args.output), f"cannot create its folder: {exc.strerror}")]
        ) from None
    spec = spec_from_args(args, str(folder))
    if len(spec.instances) != 1:
        raise ConfigError(
            [ConfigIssue("instances", len(spec.instances), "routes replicates one instance: keep one in the config")]
        )
    spec = spec.model_copy(update={"output_result_path": str(folder)})
    runtime = routed_runtime(spec, options)
    try:
        run, job_id = run_kind(
            KIND, runtime, options, args, label="routes", document=document_bytes, output=args.output
        )
    except ConfigError as exc:  # found when the trace's format is known: name the flag
        raise ConfigError([ConfigIssue(_FLAGS.get(i.path, i.path), i.value, i.message) for i in exc.issues]) from None
    document: dict[str, Any] = run.merged.value
    print_routes(document)
    print(f"routes: {args.output}")
    for entry in document["routers"]:
        if entry["facts"] is not None:
            print(f"facts ({entry['router']}): {folder / entry['facts']}")
    if args.plot is not None:
        from litehit.routes.plot import plot_routes

        print(f"plot: {plot_routes(document, args.plot)}")
    if note := default_kv_note(args):
        print(note)
    if job_id:
        print(f"job: {job_id} (litehit jobs)")
    return 0


def print_routes(document: dict[str, Any], stream: Any = None) -> None:
    """Per capacity, per router: hit rate, its difference to round_robin, imbalance, requests."""
    stream = stream or sys.stdout
    stream.write(f"{document['replicas']} replicas\n")
    routers = document["routers"]
    for entry in routers:
        if entry["curve"] is None:
            stream.write(f"{entry['router']:>12}: simulated at each capacity (state-dependent)\n")
            continue
        curve = entry["curve"]
        rate = curve["hit_tokens"][-1] / curve["input_tokens"] if curve["input_tokens"] else 0.0
        stream.write(
            f"{entry['router']:>12}: plateau {rate:.2%} from {curve['capacity_blocks'][-1]:,} blocks per replica\n"
        )
    if not routers or not routers[0]["capacities"]:
        return
    stream.write(
        f"{'capacity':>14} {'router':>12} {'hit rate':>9} {'vs rr':>8} {'max/mean':>9} {'p99/mean':>9}  requests per replica\n"
    )
    for i, first in enumerate(routers[0]["capacities"]):
        for entry in routers:
            at = entry["capacities"][i]
            delta = "" if at["vs_round_robin"] is None else f"{at['vs_round_robin'] * 100:+.2f}"
            counts = " ".join(str(r["requests"]) for r in at["replicas"][:16])
            more = " ..." if len(at["replicas"]) > 16 else ""
            stream.write(
                f"{first['capacity']:>14} {entry['router']:>12} {at['hit_rate']:>9.2%} {delta:>8} "
                f"{at['imbalance']['max_over_mean']:>9.3f} {at['imbalance']['p99_over_mean']:>9.3f}  {counts}{more}\n"
            )
