"""The ``litehit`` command line: the same jobs as the service, without any server."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import Any

from litehit.cli.commands import COMMANDS
from litehit.cli.stdin_input import STDIN, spooled_stdin
from litehit.errors import LiteHitError

__all__ = ["build_parser", "full_parser", "main"]


def _command_of(argv: list[str] | None) -> str | None:
    """The command a command line names: its first argument that is not an option."""
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of `argv`'s command with all its flags; without a known command, the list of
    commands (litehit.cli.commands) for --help and its error."""
    parser = argparse.ArgumentParser(
        prog="litehit",
        description="Exact KV-cache prefix hit rates at any capacity, from one replay of a block trace.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = _command_of(argv)
    if command in COMMANDS:  # only its module: a command starts without the others' imports
        module = importlib.import_module(f"litehit.cli.{COMMANDS[command][0]}")
        (getattr(module, "add_parsers", None) or module.add_parser)(sub)
    else:  # --help, --version or an unknown command: every command listed by its help alone
        for name, (_, text) in COMMANDS.items():
            sub.add_parser(name, help=text)
    return parser


def full_parser() -> argparse.ArgumentParser:
    """Every command with all its flags (for checks over the whole command line)."""
    parser = argparse.ArgumentParser(prog="litehit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in dict.fromkeys(module for module, _ in COMMANDS.values()):
        module = importlib.import_module(f"litehit.cli.{name}")
        (getattr(module, "add_parsers", None) or module.add_parser)(sub)
    return parser


class _VersionAction(argparse.Action):
    """--version: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from litehit import package_version

        print(f"litehit {package_version()}")
        parser.exit()


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
    if argv is None:  # the `litehit` process itself, before any command module (or numpy) loads
        # LiteHit makes no BLAS call; OpenBLAS's thread, started when numpy loads, spins about
        # 0.1 s of a core beside a replay's own threads (README, "Performance").
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    args.detach_records = argv is None  # the `litehit` process itself records in a child
    spooled: str | None = None
    try:
        with spooled_stdin(args) as spooled:
            code = int(args.func(args))
        sys.stdout.flush()
        if argv is None:  # the process ends next: its exit need not walk every object (50 ms)
            gc.freeze()
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
