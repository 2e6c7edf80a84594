"""``litehit report``: one self-contained HTML page about a facts file (see litehit.report)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import UNITS_HELP, parse_capacities
from litehit.cli.commands import COMMAND_HELP
from litehit.cli.facts_input import check_facts_file
from litehit.cli.outputs import publish_bytes
from litehit.cli.tiers import add_split_arguments, split_options
from litehit.errors import QueryError
from litehit.lane_summary import PLATEAU_FRACTIONS, parse_hit_rates

if TYPE_CHECKING:
    from litehit.report import ReplayRecord

__all__ = ["add_parser"]

MTIME_SLACK_S = 2.0  # a run record is written after its facts are published


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help=COMMAND_HELP["report"],
        description=(
            "Write one offline HTML page (inline SVG charts, nothing loaded from the network) about a\n"
            "facts file: the exact hit-rate curve per lane, the hit rates at the asked capacities (or\n"
            "powers of two up to the plateau), the capacity reaching fractions of the plateau and\n"
            "absolute hit rates, the miss attribution, and the provenance (file, sha256, the replay's\n"
            "config and trace when `litehit replay` recorded the run).\n\n"
            "  litehit report out/litehit_facts.csv -o report.html --capacity 1GiB 4GiB 20000blocks inf --target-hit-rate 0.3"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("facts", type=Path, help="a litehit_facts.csv")
    p.add_argument("-o", "--output", type=Path, required=True, help="the page to write (.html), atomically")
    p.add_argument(
        "--capacity-gb",
        "--capacity",
        nargs="+",
        metavar="CAP",
        help=f"capacities of the table: {UNITS_HELP}; -1 or inf = infinite (default: powers of two up to the plateau)",
    )
    p.add_argument(
        "--targets",
        default=",".join(map(str, PLATEAU_FRACTIONS)),
        help="fractions of the plateau (default 0.5,0.9,0.99)",
    )
    p.add_argument("--target-hit-rate", metavar="RATES", help="absolute hit rates, comma separated (e.g. 0.3,0.5)")
    p.add_argument("--tier", action="append", metavar="NAME=CAP", help="add the tier split (as litehit tiers)")
    add_split_arguments(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.report import build_report, describe_facts_file, package_version

    if args.output.suffix.lower() not in (".html", ".htm"):
        raise QueryError(f"report -o {args.output}: the file name must end in .html")
    slots = parse_capacities(args.capacity_gb) if args.capacity_gb else []
    fractions = parse_hit_rates(args.targets, "--targets")
    if 0 in fractions:  # a fraction of the plateau: 0 asks for nothing
        raise QueryError(f"--targets must be fractions of the plateau in (0, 1], got {args.targets}")
    hit_rates = parse_hit_rates(args.target_hit_rate) if args.target_hit_rate else []
    tiers = None
    if args.tier:
        from litehit.jobs.tiers import tiers_of

        options = split_options(args)
    elif args.model or args.gpu:
        raise QueryError("--model and --gpu estimate the prefill of a tier split: give --tier too")
    check_facts_file(args.facts)
    if args.tier:
        tiers = tiers_of(args.facts, options, None, [])
    page = build_report(
        args.facts,
        facts_file=describe_facts_file(args.facts),
        version=package_version(),
        generated_at=datetime.now(UTC),
        capacities=slots,
        plateau_fractions=fractions,
        hit_rate_targets=hit_rates,
        replay=_replay_record(args.facts),
        tiers=tiers,
    )
    publish_bytes(args.output, page.encode())
    print(f"report written to {args.output}")
    return 0


def _replay_record(facts: Path) -> ReplayRecord | None:
    """The newest succeeded replay that `litehit replay` recorded for this very file (same
    resolved path, recorded after the file was last written); None when there is none or the
    database cannot be read. Never creates or migrates a database."""
    from litehit.jobs.records import wait_for_records
    from litehit.settings import get_settings

    wait_for_records()  # `litehit replay F && litehit report F`: its recording may still be committing
    settings = get_settings()
    url = settings.db_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None
    try:
        return _find_record(url, facts)
    except Exception as exc:  # an unreadable or older database: the page says the replay is unknown
        print(f"litehit: warning: no replay record read from {url}: {exc}", file=sys.stderr)
        return None


def _find_record(url: str, facts: Path) -> ReplayRecord | None:
    from sqlalchemy import select

    from litehit.db.models import Job
    from litehit.db.session import session_scope
    from litehit.db.states import JobState
    from litehit.report import ReplayRecord

    resolved = str(facts.resolve())
    modified = facts.stat().st_mtime
    with session_scope(url) as session:
        query = (
            select(Job)
            .where(Job.kind == "replay", Job.state == JobState.SUCCEEDED, Job.output_path == resolved)
            .order_by(Job.finished_at.desc())
            .limit(1)
        )
        job = session.scalars(query).first()
        if job is None or job.finished_at is None:
            return None
        finished = job.finished_at if job.finished_at.tzinfo else job.finished_at.replace(tzinfo=UTC)
        if finished.timestamp() + MTIME_SLACK_S < modified:
            return None  # the file was written again after that replay, by something unrecorded
        config = dict(job.spec)
        trace: dict[str, Any] = {"path": config.get("trace_file_path", "")}
        stats = dict(job.stats or {})
        if "trace_format" in stats:
            trace["format"] = stats.pop("trace_format")
        return ReplayRecord(job.id, config, trace, stats, finished)
