"""Trace input: opening (plain, gzip, zstd), format detection, chunking and C scanning."""

from worker.traces.formats import detect_format
from worker.traces.scan import ParsedChunk, scan_chunk
from worker.traces.source import TextChunk, iter_text_chunks, open_trace

__all__ = ["ParsedChunk", "TextChunk", "detect_format", "iter_text_chunks", "open_trace", "scan_chunk"]
