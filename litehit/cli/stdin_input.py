"""``-`` for standard input wherever a command reads a trace, a config or a facts file: the input
is spooled to a private temporary file first (the readers need a file they can open more than
once: format detection, then the scan), removed when the command ends. Messages name it ``-``."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["STDIN", "spooled_stdin"]

STDIN = "-"
_INPUTS = ("source", "facts")  # the positional inputs of the commands


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
        try:
            yield str(path)
        finally:
            setattr(args, name, value)
