"""Opening trace files (compression detected from magic bytes) and cutting them into chunks of
whole lines, with the number of the first line of each chunk."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from worker.errors import TraceError

__all__ = ["CHUNK_BYTES", "TextChunk", "iter_text_chunks", "open_trace"]

CHUNK_BYTES = 4 << 20
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def open_trace(path: str | Path) -> BinaryIO:
    """Opens a trace for binary reading, decompressing gzip or zstd transparently."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except OSError as exc:
        raise TraceError(str(path), 0, f"cannot open trace: {exc.strerror or exc}") from None
    magic = raw.read(4)
    raw.seek(0)
    if magic.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic.startswith(ZSTD_MAGIC):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True, read_across_frames=True)
        return io.BufferedReader(reader)  # type: ignore[arg-type]
    return raw


@dataclass(frozen=True, slots=True)
class TextChunk:
    data: bytes  # whole lines; the last one may lack its '\n' only at the end of the file
    first_line: int  # 1-based number of the first line in data
    index: int  # 0-based position of the chunk in the file
    source_offset: int  # bytes of the underlying file consumed so far (for progress)


def iter_text_chunks(stream: BinaryIO, path: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[TextChunk]:
    """Yields chunks of whole lines. A leading UTF-8 byte-order mark is dropped."""
    carry = b""
    line = 1
    index = 0
    first = True
    raw = getattr(stream, "fileobj", None) or getattr(stream, "raw", None) or stream
    while True:
        try:
            block = stream.read(chunk_bytes)
        except (OSError, EOFError, zstandard.ZstdError) as exc:
            raise TraceError(path, line, f"cannot read (corrupt compressed data?): {exc}") from None
        if first:
            if block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
            first = False
        if not block:
            if carry:
                yield TextChunk(carry, line, index, _tell(raw))
            return
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        body = data[: cut + 1]
        yield TextChunk(body, line, index, _tell(raw))
        index += 1
        line += body.count(b"\n")


def _tell(raw: object) -> int:
    try:
        return int(raw.tell())  # type: ignore[attr-defined]
    except (OSError, AttributeError, ValueError):
        return 0
