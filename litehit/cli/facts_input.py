"""The facts file every analysis command reads: checked up front so that a wrong path names the
right thing (a missing facts file, or a trace given where facts are expected)."""

from __future__ import annotations

from pathlib import Path

from litehit.errors import FactsError, TraceError
from litehit.traces.source import READ_ERRORS, open_trace

__all__ = ["check_facts_file"]

UNREADABLE: tuple[type[BaseException], ...] = (TraceError, *READ_ERRORS)
TRACE_HINT = "this looks like a trace, not a facts file: run `litehit replay` first"


def check_facts_file(path: Path) -> None:
    """FactsError when path does not exist or holds a JSONL trace; anything else is left to the
    facts reader (FIFOs and other non-regular files are not read here)."""
    if not path.exists():
        raise FactsError(str(path), 0, "no such facts file")
    if not path.is_file():
        return
    try:
        with open_trace(path) as stream:
            head = stream.read(64).lstrip()
    except UNREADABLE:
        return  # the facts reader reports it with its own words
    if head.startswith((b"{", b"[")):
        raise FactsError(str(path), 0, TRACE_HINT)
