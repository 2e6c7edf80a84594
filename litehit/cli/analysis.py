"""``litehit curve``, ``litehit misses`` and ``litehit plot``: analyses of a facts file."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import DEFAULT_TARGETS, GIB, parse_capacities
from litehit.errors import QueryError
from litehit.publish import AtomicPublisher

if TYPE_CHECKING:
    from litehit.curve import InstanceCurve

# The analyses import their modules (and matplotlib) lazily, so that `litehit replay` starts fast.

__all__ = ["add_parsers", "print_curve_summary"]


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "curve",
        help="the exact hit-rate curve over all capacities, and the capacity for target hit rates",
        description=(
            "Per instance: every capacity where the hit rate changes, from 0 to the infinite-capacity\n"
            "plateau, and the smallest capacity reaching each target fraction of that plateau.\n\n"
            "  litehit curve out/litehit_facts.csv --targets 0.9,0.99 -o curve.json   (or .csv)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument(
        "--targets",
        default=",".join(map(str, DEFAULT_TARGETS)),
        help="fractions of the plateau (default 0.5,0.9,0.95,0.99)",
    )
    p.add_argument("-o", "--output", type=Path, help="write every breakpoint: .json (all instances) or .csv")
    p.set_defaults(func=_curve)

    p = sub.add_parser(
        "misses",
        help="where the input tokens go: hit, evicted, cold, expired, incomplete tail",
        description=(
            "Split all input tokens per instance and capacity into hit / evicted (lost only to the\n"
            "capacity limit) / cold (never seen) / expired (TTL) / tail (never a full block).\n"
            "Plain facts report cold and expired together; replay with --extended to split them.\n\n"
            "  litehit misses out/litehit_facts.csv --capacity-gb 1 4 16 -1 [--json]"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument("--capacity-gb", nargs="+", required=True, metavar="GB")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    p.set_defaults(func=_misses)

    p = sub.add_parser(
        "plot",
        help="PNG and SVG plots: hit rate vs capacity, and miss attribution",
        description="  litehit plot out/litehit_facts.csv -o plots/ [--capacity-gb 1 4 16]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    p.add_argument("--capacity-gb", nargs="*", default=[], metavar="GB", help="capacities to mark")
    p.set_defaults(func=_plot)


def _targets(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise QueryError(f"invalid --targets: {text}") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise QueryError(f"--targets must be fractions in (0, 1], got {text}")
    return values


def _curve(args: argparse.Namespace) -> int:
    from litehit.curve import exact_curves

    curves = exact_curves(args.facts, _targets(args.targets))
    print_curve_summary(curves)
    if args.output is not None:
        with AtomicPublisher(args.output) as out:
            if args.output.suffix == ".csv":
                text = io.StringIO()
                w = csv.writer(text, lineterminator="\n")
                w.writerow(
                    ["instance_id", "capacity_blocks", "capacity_bytes", "capacity_gib", "hit_tokens", "hit_rate"]
                )
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
                out.write(text.getvalue().encode())
            else:
                out.write(json.dumps({"instances": [c.as_dict() for c in curves]}).encode())
            out.commit()
        print(f"breakpoints written to {args.output}")
    return 0


def print_curve_summary(curves: list[InstanceCurve]) -> None:
    for curve in curves:
        p = curve.plateau
        where = f" ({p.capacity_blocks:,} blocks)" if p.capacity_blocks is not None else ""
        print(
            f"{curve.instance_id}: {curve.requests:,} requests, {len(curve):,} breakpoints; infinite capacity "
            f"{p.hit_rate:.2%}, reached at {p.capacity_gib:.4g} GiB{where}"
        )
        for fraction, i in sorted(curve.targets.items()):
            t = curve.point(i)
            where = f" ({t.capacity_blocks:,} blocks)" if t.capacity_blocks is not None else ""
            print(f"  {fraction:>6.1%} of it ({t.hit_rate:.2%}) from {t.capacity_gib:.4g} GiB{where}")


def _misses(args: argparse.Namespace) -> int:
    from litehit.misses import attribute_misses

    extended, rows = attribute_misses(args.facts, parse_capacities(args.capacity_gb))
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row.as_dict()) + "\n")
        return 0
    parts = ["hit", "evicted", "cold", "expired", "tail"] if extended else ["hit", "evicted", "cold_or_expired", "tail"]
    width = max([len(r.instance_id) for r in rows] + [8]) + 2
    print("instance".ljust(width) + "capacity".rjust(10) + "".join(p.replace("_", " ").rjust(17) for p in parts))
    for r in rows:
        cap = "inf" if r.capacity_gb < 0 else f"{r.capacity_gb:g} GiB"
        den = r.input_tokens or 1
        print(r.instance_id.ljust(width) + cap.rjust(10) + "".join(f"{getattr(r, p) / den:17.2%}" for p in parts))
    if not extended:
        print("(plain facts: cold and expired are reported together; replay with --extended to split them)")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from litehit.plots import plot_facts

    files = plot_facts(
        args.facts, args.output, capacities=parse_capacities(args.capacity_gb) if args.capacity_gb else []
    )
    for path in files:
        print(path)
    return 0
