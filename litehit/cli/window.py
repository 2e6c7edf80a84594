"""``litehit window``: size an eviction-attribution window from a replay at one capacity, or
(``--estimate``) compute the memory estimate alone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import counted, format_seconds
from litehit.cli.commands import COMMAND_HELP
from litehit.cli.outputs import check_plot_flag
from litehit.cli.trace_input import add_trace_arguments, default_kv_note, spec_from_args
from litehit.errors import ConfigError, ConfigIssue
from litehit.policies.names import POLICY_CHOICES

if TYPE_CHECKING:
    from litehit.window.result import DelayStats, LaneWindow, MissReport, WindowResult, WindowSettings

__all__ = ["add_parser", "print_window"]

_TRACE_ONLY = ("capacity_gb", "output", "plot")
_ESTIMATE_ONLY = ("evictions_per_s", "window_s")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "window",
        help=COMMAND_HELP["window"],
        description=(
            "Simulate every lane at one capacity under one eviction policy (same inputs, lanes,\n"
            "routing and re-blocking as `litehit replay`; no TTL). Every request with fewer hits\n"
            "than complete blocks is a miss of its first uncached block: `evicted` (delay = request\n"
            "time - that key's latest eviction) or `no_match`. Reports the delay quantiles, the\n"
            "coverage of evicted misses by window length, the smallest window W reaching\n"
            "--coverage, its ring of --bucket-seconds buckets, the peak eviction rate E (most\n"
            "evictions in one aligned second) and the memory E x W x S / L, per lane, per request\n"
            "category and over all lanes.\n\n"
            "  litehit window TRACE|CONFIG.json --capacity-gb C [--policy lru] [--coverage 0.99]\n"
            "      [--entry-bytes 24] [--load-factor 0.8] [--bucket-seconds 10] [-o window.json]\n"
            "      [--plot window.png]\n"
            "  litehit window --estimate --evictions-per-s E --window-s W [--entry-bytes S]\n"
            "      [--load-factor L]"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_arguments(p, source_required=False)  # --estimate needs no trace
    p.add_argument(
        "--capacity-gb",
        "--capacity",
        metavar="CAP",
        help="cache capacity > 0: binary GiB (1, 512MiB), or per lane 20000blocks (exactly that many blocks) or "
        "1Mtokens (tokens // the lane's block size blocks)",
    )
    p.add_argument("--policy", default="lru", help=f"eviction policy: {POLICY_CHOICES} (default lru)")
    p.add_argument("--coverage", default="0.99", help="target share of evicted misses, in (0, 1] (default 0.99)")
    p.add_argument("--entry-bytes", default="24", help="S: bytes per retained entry (default 24)")
    p.add_argument("--load-factor", default="0.8", help="L: hash-table load factor, in (0, 1] (default 0.8)")
    p.add_argument("--bucket-seconds", default="10", help="ring bucket width in seconds (default 10)")
    p.add_argument("-o", "--output", type=Path, help="write window.json here (atomically)")
    p.add_argument("--plot", type=Path, help="draw coverage over window length (.png or .svg)")
    p.add_argument("--estimate", action="store_true", help="print E x W x S / L for the given E and W only")
    p.add_argument("--evictions-per-s", help="E for --estimate")
    p.add_argument("--window-s", help="W in seconds for --estimate")
    p.set_defaults(func=_run)


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _flagged(exc: ConfigError) -> ConfigError:
    """The options' field paths as the flags the user typed."""
    return ConfigError([ConfigIssue(_flag(i.path) if i.path else i.path, i.value, i.message) for i in exc.issues])


def _refuse(args: argparse.Namespace, names: tuple[str, ...], why: str) -> None:
    given = [ConfigIssue(_flag(n), getattr(args, n), why) for n in names if getattr(args, n) is not None]
    if given:
        raise ConfigError(given[:1])


def _run(args: argparse.Namespace) -> int:
    return _estimate(args) if args.estimate else _size(args)


def _estimate(args: argparse.Namespace) -> int:
    from litehit.window.memory import MemoryEstimate
    from litehit.window.options import parse_estimate_options

    if args.source is not None:
        raise ConfigError([ConfigIssue("TRACE", args.source, "--estimate takes no trace")])
    _refuse(args, _TRACE_ONLY, "only with a trace, not with --estimate")
    for name in _ESTIMATE_ONLY:
        if getattr(args, name) is None:
            raise ConfigError([ConfigIssue(_flag(name), None, "required with --estimate")])
    data = {name: getattr(args, name) for name in (*_ESTIMATE_ONLY, "entry_bytes", "load_factor")}
    try:
        o = parse_estimate_options(data)
    except ConfigError as exc:
        raise _flagged(exc) from None
    print(MemoryEstimate(o.evictions_per_s, o.window_s, o.entry_bytes, o.load_factor).describe())
    return 0


def _size(args: argparse.Namespace) -> int:
    from litehit.cli.run_kind import run_kind
    from litehit.jobs.window import KIND
    from litehit.window.options import parse_window_options

    if args.source is None:
        raise ConfigError([ConfigIssue("TRACE", None, "a trace or config file is required (or --estimate)")])
    _refuse(args, _ESTIMATE_ONLY, "only with --estimate")
    if args.capacity_gb is None:
        raise ConfigError([ConfigIssue("--capacity-gb", None, "required with a trace")])
    data = {n: getattr(args, n) for n in ("policy", "capacity_gb", "coverage", "entry_bytes", "load_factor")}
    try:
        options = parse_window_options({**data, "bucket_seconds": args.bucket_seconds})
    except ConfigError as exc:
        raise _flagged(exc) from None
    check_plot_flag(args.plot)
    spec = spec_from_args(args, ".")
    run, job_id = run_kind(
        KIND, spec, options, args, label="window", document=lambda r: r.json_bytes(), output=args.output
    )
    result: WindowResult = run.merged.value
    if args.output is not None:
        print(f"window: {args.output}")
    if args.plot is not None:
        from litehit.window.plot import plot_window

        print(f"plot: {plot_window(result, args.plot)}")
    print_window(result)
    if note := default_kv_note(args):
        print(note)
    if job_id:
        print(f"job: {job_id} (litehit jobs)")
    return 0


def _delays(d: DelayStats) -> str:
    if not d.count:
        return "no evicted miss"

    def f(seconds: float | None) -> str:
        return "-" if seconds is None else format_seconds(seconds)

    return f"delay p50 {f(d.p50)}, p90 {f(d.p90)}, p99 {f(d.p99)}, p99.9 {f(d.p999)}, max {f(d.max)}"


def _misses(report: MissReport | LaneWindow) -> str:
    o = report.outcomes
    return f"{report.requests:,} requests: {o.evicted:,} evicted, {o.no_match:,} no_match misses; {_delays(report.delay_s)}"


def _lane(lane: LaneWindow, settings: WindowSettings, stream: Any) -> None:
    from litehit.window.memory import MemoryEstimate

    stream.write(
        f"lane {lane.lane} (block {lane.block_size} tokens, {lane.block_bytes:,} B per block): {lane.policy} at "
        f"{_capacity(lane)} = {counted(lane.capacity_blocks, 'block')}, {counted(lane.evictions, 'eviction')}\n"
    )
    stream.write(f"  {_misses(lane)}\n")
    if lane.coverage:
        table = ", ".join(f"{format_seconds(p.window_s)} {p.coverage:.1%}" for p in lane.coverage)
        stream.write(f"  coverage: {table}\n")
    stream.write(
        f"  window for {lane.coverage_target:.4g} coverage: W = {format_seconds(lane.window_s)}; ring of {lane.buckets:,} x "
        f"{lane.bucket_s:g} s buckets (up to {lane.extra_retention_s:g} s extra retention)\n"
    )
    stream.write(f"  peak evictions: E = {lane.peak_evictions_per_s:,}/s (second {lane.peak_second})\n")
    estimate = MemoryEstimate(lane.peak_evictions_per_s, lane.window_s, settings.entry_bytes, settings.load_factor)
    stream.write("".join(f"  {line}\n" for line in estimate.describe().splitlines()))
    for name, report in lane.categories.items() if len(lane.categories) > 1 else ():
        stream.write(f"  {name}: {_misses(report)}; W = {format_seconds(report.window_s)}\n")


def _capacity(lane: LaneWindow) -> str:
    """``2 GiB`` as before; a capacity in blocks or tokens as asked, with its bytes on the lane."""
    if lane.capacity is None:
        return f"{lane.capacity_gb:g} GiB"
    from litehit.capacity import GIB, format_bytes, parse_capacities

    (slot,) = parse_capacities([lane.capacity])
    return f"{slot.label} ({format_bytes(round(lane.capacity_gb * GIB))})"


def print_window(result: WindowResult, stream: Any = None) -> None:
    """The sizing, lane by lane, then over all lanes."""
    stream = stream or sys.stdout
    for lane in result.lanes:
        _lane(lane, result.settings, stream)
    if len(result.lanes) > 1:
        o = result.overall
        stream.write(
            f"all lanes: {_misses(o)}; W = {format_seconds(o.window_s)} for {result.settings.coverage_target:.4g}\n"
        )
