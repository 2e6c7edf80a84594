"""``litehit migrate``: bring the database (LITEHIT_DATABASE_URL, or the embedded SQLite) to the
newest schema, from any install: the migrations ship inside the package."""

from __future__ import annotations

import argparse
from typing import Any

from litehit.cli.commands import COMMAND_HELP

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "migrate",
        help=COMMAND_HELP["migrate"],
        description="  litehit migrate [--revision head]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--revision", default="head", help="target revision (default: head)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from litehit.db.migrate import current_revision, upgrade
    from litehit.settings import get_settings

    url = get_settings().db_url
    upgrade(url, args.revision)
    print(f"database at revision {current_revision(url)}")
    return 0
