"""``litehit curve``, ``litehit misses`` and ``litehit plot``: analyses of a facts file."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import DEFAULT_TARGETS, GIB, UNITS_HELP, counted, parse_capacities
from litehit.cli.commands import COMMAND_HELP
from litehit.cli.facts_input import check_facts_file
from litehit.cli.outputs import publish_bytes
from litehit.errors import QueryError
from litehit.lane_summary import parse_hit_rates, target_line

if TYPE_CHECKING:
    from litehit.curve import InstanceCurve
    from litehit.misses import Attribution

# The analyses import their modules (and matplotlib) lazily, so that `litehit replay` starts fast.

__all__ = ["add_parsers", "print_curve_summary"]


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "curve",
        help=COMMAND_HELP["curve"],
        description=(
            "Per instance: every capacity where the hit rate changes, from 0 to the infinite-capacity\n"
            "plateau, the smallest capacity reaching each target fraction of that plateau, and\n"
            "the smallest capacity reaching each absolute hit rate of --target-hit-rate.\n\n"
            "  litehit curve out/litehit_facts.csv --targets 0.9,0.99 -o curve.json   (or .csv)\n"
            "  litehit curve out/litehit_facts.csv --target-hit-rate 0.3,0.5 --format csv"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument(
        "--targets",
        default=",".join(map(str, DEFAULT_TARGETS)),
        help="fractions of the plateau (default 0.5,0.9,0.95,0.99)",
    )
    p.add_argument(
        "--target-hit-rate",
        metavar="RATES",
        help="absolute hit rates, comma separated (e.g. 0.3,0.5): the smallest capacity reaching each",
    )
    p.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        help="stdout: the summary (table, default) or every breakpoint (csv, json); with -o, must match its extension",
    )
    p.add_argument("-o", "--output", type=Path, help="write every breakpoint: .json (all instances) or .csv")
    p.set_defaults(func=_curve)

    p = sub.add_parser(
        "misses",
        help=COMMAND_HELP["misses"],
        description=(
            "Split all input tokens per instance and capacity into hit / evicted (lost only to the\n"
            "capacity limit) / cold (never seen) / expired (TTL) / tail (never a full block).\n"
            "Plain facts report cold and expired together; replay with --extended to split them.\n\n"
            "  litehit misses out/litehit_facts.csv --capacity-gb 1 4 16 -1 [--format table|csv|json] [-o FILE]\n"
            "      json is JSON lines; -o FILE ends in .txt (table), .csv or .jsonl"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument(
        "--capacity-gb", "--capacity", nargs="+", required=True, metavar="CAP", help=f"{UNITS_HELP}; -1 = infinite"
    )
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table (= --format json)")
    p.add_argument("--format", choices=["table", "csv", "json"], help="table (default), csv or json (JSON lines)")
    p.add_argument("-o", "--output", type=Path, help="write here (atomically) instead of stdout: .txt, .csv or .jsonl")
    p.set_defaults(func=_misses)

    p = sub.add_parser(
        "plot",
        help=COMMAND_HELP["plot"],
        description=(
            "  litehit plot out/litehit_facts.csv [-o plots/] [--capacity-gb 1 4 16]\n"
            "      without -o, the plots go to a folder named plots next to the facts file"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument("-o", "--output", type=Path, help="output directory (default: plots/ in the facts file's folder)")
    p.add_argument(
        "--capacity-gb", "--capacity", nargs="*", default=[], metavar="CAP", help=f"capacities to mark: {UNITS_HELP}"
    )
    p.add_argument("--targets", help="fractions of the plateau to mark per lane, comma separated (e.g. 0.5,0.9,0.99)")
    p.set_defaults(func=_plot)


def _targets(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise QueryError(f"invalid --targets: {text}") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise QueryError(f"--targets must be fractions in (0, 1], got {text}")
    return values


def output_format(command: str, output: Path | None, given: str | None, by_suffix: dict[str, str]) -> str:
    """The format of a command's output: --format, or the -o extension, which must agree; a
    QueryError (one line, nothing written) otherwise."""
    if output is None:
        return given or "table"
    fmt = by_suffix.get(output.suffix.lower())
    if fmt is None:
        raise QueryError(f"{command} -o {output}: the file name must end in {' or '.join(by_suffix)}")
    if given is not None and given != fmt:
        raise QueryError(f"{command} -o {output}: a {output.suffix} file cannot hold --format {given}")
    return fmt


def _curve(args: argparse.Namespace) -> int:
    from litehit.curve import exact_curves

    targets = _targets(args.targets)
    hit_rates = parse_hit_rates(args.target_hit_rate) if args.target_hit_rate else []
    fmt = output_format("curve", args.output, args.format, {".json": "json", ".csv": "csv"})
    check_facts_file(args.facts)
    curves = exact_curves(args.facts, targets)
    if args.output is None and fmt != "table":
        sys.stdout.write(_curve_text(curves, fmt, hit_rates))
        return 0
    print_curve_summary(curves, hit_rates)
    if args.output is not None:
        publish_bytes(args.output, _curve_text(curves, fmt, hit_rates).encode())
        print(f"breakpoints written to {args.output}")
    return 0


def _curve_text(curves: list[InstanceCurve], fmt: str, hit_rates: list[float]) -> str:
    """Every breakpoint, as CSV or as one JSON document."""
    if fmt == "json":
        instances = []
        for c in curves:
            data = c.as_dict()
            if hit_rates:
                data["hit_rate_targets"] = [_hit_rate_target(c, r) for r in hit_rates]
            instances.append(data)
        return json.dumps({"instances": instances})
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(["instance_id", "capacity_blocks", "capacity_bytes", "capacity_gib", "hit_tokens", "hit_rate"])
    for c in curves:
        rates = c.hit_rates()
        for i in range(len(c)):
            cell: int | str = "" if c.capacity_blocks is None else c.capacity_blocks[i]
            w.writerow(
                [
                    c.instance_id,
                    cell,
                    c.capacity_bytes[i],
                    repr(c.capacity_bytes[i] / GIB),
                    int(c.hit_tokens[i]),
                    repr(float(rates[i])),
                ]
            )
    return text.getvalue()


def _hit_rate_target(curve: InstanceCurve, rate: float) -> dict[str, Any]:
    i = curve.index_reaching_hit_rate(rate)
    return {"target_hit_rate": rate, "reachable": i is not None, **(curve.point(i).as_dict() if i is not None else {})}


def print_curve_summary(curves: list[InstanceCurve], hit_rates: list[float] | None = None) -> None:
    for curve in curves:
        p = curve.plateau
        where = f" ({counted(p.capacity_blocks, 'block')})" if p.capacity_blocks is not None else ""
        print(
            f"{curve.instance_id}: {curve.requests:,} requests, {len(curve):,} breakpoints; infinite capacity "
            f"{p.hit_rate:.2%}, reached at {p.capacity_gib:.4g} GiB{where}"
        )
        for fraction, i in sorted(curve.targets.items()):
            t = curve.point(i)
            where = f" ({counted(t.capacity_blocks, 'block')})" if t.capacity_blocks is not None else ""
            print(f"  {fraction:>6.1%} of it ({t.hit_rate:.2%}) from {t.capacity_gib:.4g} GiB{where}")
        for rate in hit_rates or []:
            print(f"  {target_line(curve, rate)}")


def _misses(args: argparse.Namespace) -> int:
    from litehit.misses import attribute_misses

    slots = parse_capacities(args.capacity_gb)
    given = "json" if args.json else args.format
    if args.json and args.format not in (None, "json"):
        raise QueryError(f"misses: --json cannot be combined with --format {args.format}")
    fmt = output_format("misses", args.output, given, {".txt": "table", ".csv": "csv", ".jsonl": "json"})
    check_facts_file(args.facts)
    extended, rows = attribute_misses(args.facts, slots)
    text = _misses_text(extended, rows, fmt)
    if args.output is None:
        sys.stdout.write(text)
    else:
        publish_bytes(args.output, text.encode())
        print(f"miss attribution written to {args.output}")
    return 0


def _misses_text(extended: bool, rows: list[Attribution], fmt: str) -> str:
    if fmt == "json":
        return "".join(json.dumps(row.as_dict()) + "\n" for row in rows)
    parts = ["hit", "evicted", "cold", "expired", "tail"] if extended else ["hit", "evicted", "cold_or_expired", "tail"]
    out = io.StringIO()
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["instance_id", "capacity_gb", "input_tokens", *parts])
        for r in rows:
            gb = r.capacity if r.capacity_gb is None else repr(r.capacity_gb)  # blocks and tokens: the label
            w.writerow([r.instance_id, gb, r.input_tokens, *(getattr(r, p) for p in parts)])
        return out.getvalue()
    width = max([len(r.instance_id) for r in rows] + [8]) + 2
    out.write("instance".ljust(width) + "capacity".rjust(16) + "".join(p.replace("_", " ").rjust(17) for p in parts))
    out.write("\n")
    for r in rows:
        den = r.input_tokens or 1
        out.write(
            r.instance_id.ljust(width) + r.capacity.rjust(16) + "".join(f"{getattr(r, p) / den:17.2%}" for p in parts)
        )
        out.write("\n")
    if not extended:
        out.write("(plain facts: cold and expired are reported together; replay with --extended to split them)\n")
    return out.getvalue()


def _plot(args: argparse.Namespace) -> int:
    from litehit.plots import plot_facts

    capacities = parse_capacities(args.capacity_gb) if args.capacity_gb else []
    check_facts_file(args.facts)
    out_dir = args.output if args.output is not None else args.facts.parent / "plots"
    targets = _targets(args.targets) if args.targets else []
    files = plot_facts(args.facts, out_dir, capacities=capacities, targets=targets)
    for path in files:
        print(path)
    return 0
