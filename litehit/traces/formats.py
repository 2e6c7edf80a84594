"""Trace format detection from the first non-blank row (decision 2)."""

from __future__ import annotations

import json
from pathlib import Path

from litehit.errors import TraceError
from litehit.spec import TraceFormat
from litehit.traces.format_table import format_of_keys
from litehit.traces.source import BOM, READ_ERRORS, open_trace

__all__ = ["detect_format", "format_from_row"]


def format_from_row(row: object) -> TraceFormat | None:
    """The format a parsed JSON row belongs to (the C format table's detection keys, in its
    order), or None when it matches none."""
    if not isinstance(row, dict):
        return None
    name = format_of_keys(row.keys())
    return None if name is None else TraceFormat(name)


def detect_format(path: str | Path) -> TraceFormat | None:
    """Reads the first non-blank row of a trace and names its format (None: no rows at all);
    a row of no known format, or an unreadable file, fails with TraceError naming the line."""
    number = 1
    try:
        with open_trace(path) as stream:
            for number, raw in enumerate(stream, start=1):
                text = raw.strip()
                if number == 1 and text.startswith(BOM):
                    text = text[len(BOM) :].strip()
                if not text:
                    continue
                return _format_of_line(str(path), number, text)
    except READ_ERRORS as exc:
        raise TraceError(str(path), number, f"cannot read (corrupt or truncated compressed data?): {exc}") from None
    return None


def _format_of_line(path: str, number: int, text: bytes) -> TraceFormat:
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, huge integers, deep nesting
        reason = "nesting too deep" if isinstance(exc, RecursionError) else str(exc).splitlines()[0]
        raise TraceError(path, number, f"cannot detect the trace format: invalid JSON ({reason})") from None
    fmt = format_from_row(row)
    if fmt is None:
        keys = sorted(row)[:8] if isinstance(row, dict) else type(row).__name__
        raise TraceError(
            path,
            number,
            f"cannot detect the trace format from this row (fields {keys}); "
            f"set trace_format to one of {', '.join(f.value for f in TraceFormat)}",
        )
    return fmt
