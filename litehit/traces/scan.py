"""Scanning text chunks into validated columns with the C scanner (one scanner per thread)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from core_c.scan import ScanResult, TraceScanner
from litehit.spec import TraceFormat
from litehit.traces.source import TextChunk

__all__ = ["ParsedChunk", "scan_chunk"]

_local = threading.local()


@dataclass(frozen=True, slots=True)
class ParsedChunk:
    index: int
    first_line: int
    source_offset: int
    rows: ScanResult


def scan_chunk(chunk: TextChunk, fmt: TraceFormat, trace_block_size: int) -> ParsedChunk:
    """Scans one chunk. The C scanner releases the GIL, so threads scan in parallel."""
    scanner = getattr(_local, "scanner", None)
    if scanner is None:
        scanner = _local.scanner = TraceScanner()
    rows = scanner.scan(fmt.value, chunk.data, chunk.first_line, trace_block_size)
    return ParsedChunk(chunk.index, chunk.first_line, chunk.source_offset, rows)
