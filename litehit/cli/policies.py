"""``litehit policies``: what each eviction policy would give on this trace at fixed capacities."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.cli.commands import COMMAND_HELP
from litehit.cli.trace_input import add_trace_arguments, default_kv_note, spec_from_args
from litehit.errors import ConfigError, ConfigIssue
from litehit.policies.names import POLICY_NAMES

if TYPE_CHECKING:
    from litehit.policies.options import SweepOptions
    from litehit.policies.result import PolicyResult, PolicySweepResult

__all__ = ["add_parser", "print_sweep"]

_FLAGS = {
    "policies": "--policies",
    "capacity_gb": "--capacity-gb",
    "wa_life_seconds": "--wa-life-seconds",
    "wa_fit_window_seconds": "--wa-fit-window-seconds",
    "wa_refit_seconds": "--wa-refit-seconds",
    "verify_lru": "--verify-lru",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "policies",
        help=COMMAND_HELP["policies"],
        description=(
            "Simulate every lane at fixed cache capacities under each eviction policy, in one pass\n"
            "over the trace (same inputs, lanes, routing and re-blocking as `litehit replay`).\n\n"
            f"  litehit policies TRACE --capacity-gb 1 4 16 [--policies {','.join(POLICY_NAMES)}]\n"
            "      [--wa-life-seconds S] [--wa-fit-window-seconds 3600] [--wa-refit-seconds 600]\n"
            "      [-o policies.json] [--plot policies.png] [--verify-lru]\n\n"
            "wa: the workload-aware policy of 'KVCache in the Wild': per-category exponential\n"
            "reuse-time fits refreshed every --wa-refit-seconds over the last\n"
            "--wa-fit-window-seconds of trace time; exactly LRU until the first fit."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_arguments(p)
    p.add_argument(
        "--capacity-gb",
        "--capacity",
        nargs="+",
        required=True,
        metavar="CAP",
        help="capacities > 0: binary GiB (1, 512MiB, 1.5TiB), or per lane 20000blocks (exactly that many blocks) "
        "or 1Mtokens (tokens // the lane's block size blocks)",
    )
    p.add_argument("--policies", default=",".join(POLICY_NAMES), help="comma separated (default: all of them)")
    p.add_argument("--wa-life-seconds", help="WA horizon (default: p90 of the reuse times before the first fit)")
    p.add_argument("--wa-fit-window-seconds", default="3600", help="WA fit window of trace time (default 3600)")
    p.add_argument("--wa-refit-seconds", default="600", help="WA refit period of trace time (default 600)")
    p.add_argument("--verify-lru", action="store_true", help="check the LRU column against the exact facts")
    p.add_argument("-o", "--output", type=Path, help="write policies.json here (atomically)")
    p.add_argument("--plot", type=Path, help="draw hit ratio over capacity per policy (.png or .svg)")
    p.set_defaults(func=_run)


def parse_options(args: argparse.Namespace) -> SweepOptions:
    """The sweep options of a command line; errors name the flag and the value."""
    from litehit.policies.options import parse_sweep_options

    data = {
        "policies": [p.strip() for p in args.policies.split(",") if p.strip()],
        "capacity_gb": list(args.capacity_gb),
        "wa_life_seconds": args.wa_life_seconds,
        "wa_fit_window_seconds": args.wa_fit_window_seconds,
        "wa_refit_seconds": args.wa_refit_seconds,
        "verify_lru": args.verify_lru,
    }
    try:
        return parse_sweep_options(data)
    except ConfigError as exc:  # field paths -> the flags the user typed
        issues = []
        for issue in exc.issues:
            field, bracket, rest = issue.path.partition("[")
            issues.append(ConfigIssue(_FLAGS.get(field, field) + bracket + rest, issue.value, issue.message))
        raise ConfigError(issues) from None


def _run(args: argparse.Namespace) -> int:
    from litehit.cli.run_kind import run_kind
    from litehit.jobs.policy_sweep import KIND

    options = parse_options(args)
    if args.plot is not None and args.plot.suffix not in {".png", ".svg"}:
        raise ConfigError([ConfigIssue("--plot", str(args.plot), "a plot file ends in .png or .svg")])
    spec = spec_from_args(args, ".")
    run, job_id = run_kind(
        KIND, spec, options, args, label="policies", document=lambda r: r.json_bytes(), output=args.output
    )
    result: PolicySweepResult = run.merged.value
    if args.output is not None:
        print(f"policies: {args.output}")
    if args.plot is not None:
        from litehit.policies.plot import plot_sweep

        print(f"plot: {plot_sweep(result, args.plot)}")
    print_sweep(result)
    if note := default_kv_note(args):
        print(note)
    if job_id:
        print(f"job: {job_id} (litehit jobs)")
    return 0


def print_sweep(result: PolicySweepResult, stream: Any = None) -> None:
    """The table lane x capacity x policy: hit ratio, and its difference to LRU in points."""
    stream = stream or sys.stdout
    for lane in result.lanes:
        policies = list(dict.fromkeys(r.policy for r in lane.results))
        caps = list(dict.fromkeys(_capacity_label(r) for r in lane.results))
        cell = {(r.policy, _capacity_label(r)): r for r in lane.results}
        width = max([14, *(len(c) + 3 for c in caps)])
        stream.write(f"lane {lane.lane} (block {lane.block_size} tokens, {lane.block_bytes:,} B per block)\n")
        stream.write("  capacity".ljust(width) + "".join(p.rjust(17) for p in policies) + "\n")
        for cap in caps:
            row = f"  {cap}".ljust(width)
            lru = cell.get(("lru", cap))
            for policy in policies:
                r = cell[(policy, cap)]
                delta = f" ({(r.hit_ratio - lru.hit_ratio) * 100:+.2f})" if lru is not None and policy != "lru" else ""
                row += f"{r.hit_ratio:.2%}{delta}".rjust(17)
            stream.write(row + "\n")
        if lane.wa is not None:
            stream.write(
                f"  wa: life {lane.wa.life_s:g} s, {lane.wa.fits} fits, rates/s {_rates(lane.wa.rates_per_s)}\n"
            )
        if lane.lru_check is not None:
            c = lane.lru_check
            note = f", {c.facts_lower:,} where the trace breaks the prefix contract" if c.facts_lower else ""
            stream.write(f"  lru check: {c.equal:,} of {c.comparisons:,} equal to the exact facts{note}\n")
    if any(
        len({r.policy for r in lane.results} - {"lru"}) and any(r.policy == "lru" for r in lane.results)
        for lane in result.lanes
    ):
        stream.write("(in brackets: the difference to lru in percentage points)\n")


def _capacity_label(r: PolicyResult) -> str:
    """``2 GiB`` as before; a capacity in blocks or tokens as its blocks and their bytes."""
    if r.capacity is None:
        return f"{r.capacity_gb:g} GiB"
    from litehit.capacity import GIB, counted, format_bytes, parse_capacities

    (slot,) = parse_capacities([r.capacity])
    blocks = "" if slot.unit == "blocks" else f" = {counted(r.capacity_blocks, 'block')}"
    return f"{slot.label}{blocks} ({format_bytes(round(r.capacity_gb * GIB))})"


def _rates(rates: dict[str, float]) -> str:
    return ", ".join(f"{name} {rate:.3g}" for name, rate in sorted(rates.items())) or "none fitted"
