"""The ``litehit`` command line: the same jobs as the service, without any server."""

from __future__ import annotations

import argparse
import sys

from litehit.cli import analysis, demo, jobs, migrate, policies, query, replay, window
from litehit.errors import LiteHitError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="litehit",
        description="Exact KV-cache prefix hit rates at any capacity, from one replay of a block trace.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    replay.add_parser(sub)
    query.add_parser(sub)
    analysis.add_parsers(sub)
    policies.add_parser(sub)
    window.add_parser(sub)
    demo.add_parser(sub)
    jobs.add_parser(sub)
    migrate.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except LiteHitError as exc:
        print(f"litehit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("litehit: interrupted; nothing was published", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
