"""``-`` for standard input wherever a command reads a trace, a config or a facts file: the input
is spooled to a private temporary file first (the readers need a file they can open more than
once: format detection, then the scan), removed when the command ends. Messages name it ``-``."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["STDIN", "named_stdin", "spooled_stdin"]

STDIN = "-"
_INPUTS = ("source", "facts")  # the positional inputs of the commands
_SPOOL = "stdin_spool"  # the attribute of args holding the spooled path while the command runs


def named_stdin(args: argparse.Namespace, value: Any) -> Any:
    """value (a string, or a JSON-like list/dict of them) with the spooled path of standard input
    named ``-`` again, as a record of the run names it; value itself when nothing was spooled."""
    spool = getattr(args, _SPOOL, None)
    if spool is None:
        return value
    spellings = sorted({spool, os.path.realpath(spool)}, key=len, reverse=True)

    def name(item: Any) -> Any:
        if isinstance(item, str):
            for spelling in spellings:
                item = item.replace(spelling, STDIN)
            return item
        if isinstance(item, dict):
            return {k: name(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [name(v) for v in item]
        return item

    return name(value)


@contextlib.contextmanager
def spooled_stdin(args: argparse.Namespace) -> Iterator[str | None]:
    """Replaces an input argument ``-`` by a temporary file holding standard input; yields that
    file's path (None when no input is ``-``)."""
    name = next((n for n in _INPUTS if str(getattr(args, n, None)) == STDIN), None)
    if name is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="litehit-stdin-") as folder:
        path = Path(folder) / "stdin"
        with path.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
        value = getattr(args, name)
        setattr(args, name, path if isinstance(value, Path) else str(path))
        setattr(args, _SPOOL, str(path))
        try:
            yield str(path)
        finally:
            setattr(args, name, value)
            delattr(args, _SPOOL)
