"""Trace format detection from the first non-blank row (decision 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO

from litehit.errors import TraceError
from litehit.spec import TraceFormat
from litehit.traces.format_table import format_of_keys
from litehit.traces.source import BOM, LFS_HINT, LFS_POINTER, READ_ERRORS, open_trace

__all__ = ["detect_format", "format_from_row"]


def format_from_row(row: object) -> TraceFormat | None:
    """The format a parsed JSON row belongs to (the C format table's detection keys, in its
    order), or None when it matches none."""
    if not isinstance(row, dict):
        return None
    name = format_of_keys(row.keys())
    return None if name is None else TraceFormat(name)


BLANK = b" \t\r\n\x0b\x0c"
READ_BYTES = 1 << 20


def first_row(stream: BinaryIO) -> tuple[int, bytes] | None:
    """The 1-based line number and the text of the first non-blank line (None: only blank
    lines). Reads blocks, not lines: a run of millions of blank lines costs one bytes scan per
    block, as it does in the C scanner."""
    line, data = 1, stream.read(READ_BYTES)
    if data.startswith(BOM):
        data = data[len(BOM) :]
    while True:
        text = data.lstrip(BLANK)
        if text:
            line += data.count(b"\n", 0, len(data) - len(text))
            break
        line += data.count(b"\n")
        data = stream.read(READ_BYTES)
        if not data:
            return None
    while b"\n" not in text and (more := stream.read(READ_BYTES)):
        text += more
    return line, text.split(b"\n", 1)[0].strip()


def detect_format(path: str | Path) -> TraceFormat | None:
    """Reads the first non-blank row of a trace and names its format (None: no rows at all);
    a row of no known format, or an unreadable file, fails with TraceError naming the line."""
    try:
        with open_trace(path) as stream:
            found = first_row(stream)
    except READ_ERRORS as exc:
        raise TraceError(str(path), 0, f"cannot read (corrupt or truncated compressed data?): {exc}") from None
    if found is None:
        return None
    return _format_of_line(str(path), *found)


def _format_of_line(path: str, number: int, text: bytes) -> TraceFormat:
    if text.startswith(LFS_POINTER):
        raise TraceError(path, number, LFS_HINT)
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
