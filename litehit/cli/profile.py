"""``litehit profile``: the workload profile of a trace (who reuses what, how soon, for how long,
and how much cache that needs), per lane and per request category."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import counted, format_seconds
from litehit.cli.commands import COMMAND_HELP
from litehit.cli.trace_input import add_trace_arguments, default_kv_note, spec_from_args
from litehit.errors import ConfigError, ConfigIssue
from litehit.publish import make_output_dir

if TYPE_CHECKING:
    from litehit.profile.result import LaneProfile, Metrics, ProfileResult

__all__ = ["add_parser", "print_profile"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profile",
        help=COMMAND_HELP["profile"],
        description=(
            "Replay every lane once at infinite capacity (same inputs, lanes, routing, prefix hash,\n"
            "re-blocking and TTLs as `litehit replay`; an expired block is not a hit) and report,\n"
            "per lane and per request category: requests, tokens, blocks, the ideal hit ratio and\n"
            "each category's share of the hit tokens; the skew of reuse over keys and requests;\n"
            "reuse times (time since the key's previous access) with an exponential fit and its\n"
            "Kolmogorov-Smirnov distance; key lifespans; the capacity reaching 50/90/99% of the\n"
            "ideal hit ratio; and the working set per 60-second window.\n\n"
            "  litehit profile TRACE|CONFIG.json [--format F] [--block-sizes ...] [--block-bytes B]\n"
            "      [-o profile.json] [--plots DIR]\n"
            "  litehit profile --schema          (the JSON schema of profile.json)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_arguments(p, source_required=False)  # --schema needs no trace
    p.add_argument("-o", "--output", type=Path, help="write profile.json here (atomically)")
    p.add_argument("--plots", type=Path, metavar="DIR", help="draw the profile's plots (PNG and SVG) into DIR")
    p.add_argument("--schema", action="store_true", help="print the JSON schema of profile.json and exit")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.profile.result import ProfileResult

    if args.schema:
        if args.source is not None:
            raise ConfigError([ConfigIssue("TRACE", args.source, "--schema takes no trace")])
        print(json.dumps(ProfileResult.model_json_schema(), indent=2))
        return 0
    if args.source is None:
        raise ConfigError([ConfigIssue("TRACE", None, "a trace or config file is required (or --schema)")])
    return _profile(args)


def _profile(args: argparse.Namespace) -> int:
    from litehit.cli.run_kind import run_kind
    from litehit.jobs.profile import KIND

    if args.plots is not None:  # matplotlib is imported only to draw (0.25 s of a start-up)
        from litehit.profile.plot import check_plot_dir

        check_plot_dir(args.plots)
    spec = spec_from_args(args, ".")
    if args.output is not None:
        make_output_dir(args.output.parent)
    run, job_id = run_kind(
        KIND, spec, None, args, label="profile", document=lambda r: r.json_bytes(), output=args.output
    )
    result: ProfileResult = run.merged.value
    if args.output is not None:
        print(f"profile: {args.output}")
    if args.plots is not None:
        from litehit.profile.plot import plot_profile

        for path in plot_profile(result, args.plots):
            print(f"plot: {path}")
    print_profile(result)
    if note := default_kv_note(args):
        print(note)
    if job_id:
        print(f"job: {job_id} (litehit jobs)")
    return 0


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


def _bytes(n: int) -> str:
    from litehit.capacity import format_bytes

    return format_bytes(n)


def _metrics_line(m: Metrics) -> str:
    r = m.reuse_time
    fit = (
        f", exp fit {r.exp_rate_per_s:.4g}/s (KS {r.ks:.3f})"
        if r.exp_rate_per_s is not None and r.ks is not None
        else ""
    )
    return (
        f"{m.requests:,} requests, ideal hit ratio {m.ideal_hit_ratio:.2%}, {m.hit_token_share:.1%} of hit tokens; "
        f"reuse p50 {_seconds(r.p50_s)}, p90 {_seconds(r.p90_s)}{fit}"
    )


def _lane(lane: LaneProfile, stream: Any) -> None:
    o = lane.overall
    ttl = f", TTL {lane.ttl_s:g} s" if lane.ttl_s else ""
    stream.write(f"lane {lane.lane} (block {lane.block_size} tokens, {lane.block_bytes:,} B per block{ttl})\n")
    stream.write(
        f"  {o.requests:,} requests, {o.input_tokens:,} input tokens, {o.blocks:,} blocks; "
        f"ideal hit ratio {o.ideal_hit_ratio:.2%} ({o.hit_tokens:,} hit tokens)\n"
    )
    if o.multi_turn_share is not None:
        stream.write(f"  multi-turn requests (turn >= 2): {o.multi_turn_share:.1%}\n")
    s = o.skew
    stream.write(
        f"  skew: {s.keys_for_50:.1%} of keys take 50% of reuses, {s.keys_for_77:.1%} take 77%, "
        f"{s.keys_for_90:.1%} take 90%; {s.requests_for_90:.1%} of requests take 90% of hit tokens\n"
    )
    r = o.reuse_time
    stream.write(
        f"  reuse time ({r.count:,} reuses): mean {_seconds(r.mean_s)}, p50 {_seconds(r.p50_s)}, "
        f"p90 {_seconds(r.p90_s)}, p99 {_seconds(r.p99_s)}"
        + (
            f"; exponential fit {r.exp_rate_per_s:.4g}/s, KS {r.ks:.3f}"
            if r.exp_rate_per_s and r.ks is not None
            else ""
        )
        + "\n"
    )
    life = o.lifespan
    stream.write(
        f"  lifespan ({life.keys:,} keys): p50 {_seconds(life.p50_s)}, p90 {_seconds(life.p90_s)}, "
        f"p99 {_seconds(life.p99_s)}; {life.never_reused_share:.1%} never reused\n"
    )
    caps = ", ".join(f"{p}% from {_bytes(c.bytes)} ({counted(c.blocks, 'block')})" for p, c in o.capacity.items())
    stream.write(f"  capacity for the ideal hit ratio: {caps}\n")
    w = o.working_set_60s
    stream.write(f"  working set per {w.window_s:g} s: max {w.max:,} keys, p50 {w.p50:,} ({w.windows:,} windows)\n")
    for name, m in lane.categories.items() if len(lane.categories) > 1 else ():
        stream.write(f"  {name}: {_metrics_line(m)}\n")


def print_profile(result: ProfileResult, stream: Any = None) -> None:
    """The profile, lane by lane."""
    stream = stream or sys.stdout
    for lane in result.lanes:
        _lane(lane, stream)
