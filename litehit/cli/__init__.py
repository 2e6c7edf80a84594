"""The ``litehit`` command line: the same jobs as the service, without any server."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from litehit.cli import (
    analysis,
    attribution,
    demo,
    jobs,
    migrate,
    models,
    policies,
    profile,
    query,
    replay,
    report,
    tiers,
    window,
)
from litehit.cli.stdin_input import STDIN, spooled_stdin
from litehit.errors import LiteHitError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="litehit",
        description="Exact KV-cache prefix hit rates at any capacity, from one replay of a block trace.",
    )
    parser.add_argument("--version", action="version", version=f"litehit {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    replay.add_parser(sub)
    query.add_parser(sub)
    analysis.add_parsers(sub)
    policies.add_parser(sub)
    window.add_parser(sub)
    attribution.add_parser(sub)
    profile.add_parser(sub)
    tiers.add_parsers(sub)
    demo.add_parser(sub)
    jobs.add_parser(sub)
    migrate.add_parser(sub)
    models.add_parser(sub)
    report.add_parser(sub)
    return parser


def _version() -> str:
    try:
        return version("litehit")
    except PackageNotFoundError:
        return "unknown"


def _stdout_closed() -> int:
    """The reader of stdout went away (`litehit curve F | head -1`): exit 0 quietly like standard
    tools; stdout now points at /dev/null so the interpreter's final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    spooled: str | None = None
    try:
        with spooled_stdin(args) as spooled:
            code = int(args.func(args))
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except LiteHitError as exc:
        message = str(exc) if spooled is None else str(exc).replace(spooled, STDIN)
        print(f"litehit: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("litehit: interrupted; nothing was published", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
