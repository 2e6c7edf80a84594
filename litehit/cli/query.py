"""``litehit query``: capacity queries over a facts file (the original facts query tool)."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import UNITS_HELP, parse_capacities
from litehit.cli.commands import COMMAND_HELP
from litehit.cli.facts_input import check_facts_file
from litehit.cli.stdin_input import named_stdin
from litehit.publish import AtomicPublisher

if TYPE_CHECKING:
    from litehit.query import QueryResult

__all__ = ["add_parser", "print_table"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "query",
        help=COMMAND_HELP["query"],
        description=(
            "Project facts onto cache capacities (binary GiB; negative = infinite; order kept,\n"
            "duplicates and 0 allowed). With -o, writes the original query JSONL: one row per\n"
            "request, one summary per instance, one total. Without -o, prints the summaries.\n\n"
            "  litehit query out/litehit_facts.csv --capacity-gb 0.5 1 2 4 -1 -o query.jsonl"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path, help="a litehit_facts.csv")
    p.add_argument(
        "--capacity-gb",
        "--capacity",
        nargs="+",
        required=True,
        metavar="CAP",
        help=f"capacities: {UNITS_HELP}; -1 or inf = infinite",
    )
    p.add_argument("-o", "--output", type=Path, help="write the JSONL here (atomically)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.jobs.kinds import Kind
    from litehit.jobs.records import JobRecorder
    from litehit.query import query_facts

    slots = parse_capacities(args.capacity_gb)

    def spec() -> dict[str, Any]:  # built only by the recording (pydantic's models are not needed to answer)
        from litehit.jobs.query import QueryJobSpec

        gb = [s.recorded_gb for s in slots]
        return QueryJobSpec(capacity_gb=gb, targets=[], facts_path=str(args.facts.resolve())).model_dump(mode="json")

    with JobRecorder(
        Kind.QUERY,
        spec,
        rename=partial(named_stdin, args),
        detach=getattr(args, "detach_records", False),
    ) as record:
        check_facts_file(args.facts)
        if args.output is None:
            result = query_facts(args.facts, slots)
        else:
            with AtomicPublisher(args.output) as out:
                result = query_facts(args.facts, slots, out)
                out.commit()
        record.query_succeeded(result, str(args.output.resolve()) if args.output else None)
        if args.output is not None:
            print(f"facts query done: {args.output}")
        print_table(result)  # the answer is out before the run is recorded
    return 0


def print_table(result: QueryResult, stream: Any = None) -> None:
    stream = stream or sys.stdout
    caps = [s.label for s in result.slots]
    widths = [max(12, len(c) + 2) for c in caps]  # a label never runs into the next one
    width = max([len("instance"), *(len(i.instance_id or b"") for i in result.instances), 5]) + 2
    header = "".join(c.rjust(w) for c, w in zip(caps, widths, strict=True))
    stream.write("instance".ljust(width) + "requests".rjust(10) + header + "\n")
    for summary in [*result.instances, result.total]:
        name = "total" if summary.instance_id is None else summary.instance_id.decode("utf-8", "replace")
        rates = "".join(f"{r:.2%}".rjust(w) for r, w in zip(summary.hit_rates, widths, strict=True))
        stream.write(name.ljust(width) + f"{summary.requests:10,}" + rates + "\n")
