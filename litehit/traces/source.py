"""Opening trace files (compression detected from magic bytes) and cutting them into chunks of
whole lines, with the number of the first line of each chunk."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import zstandard

from litehit.errors import TraceError

__all__ = [
    "CHUNK_BYTES",
    "LFS_HINT",
    "LFS_POINTER",
    "READ_ERRORS",
    "TextChunk",
    "bytes_consumed",
    "iter_text_chunks",
    "open_trace",
]

CHUNK_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BOM = b"\xef\xbb\xbf"
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
"""How a Git LFS pointer file starts: what a clone without `git lfs pull` holds instead of the data."""
LFS_HINT = "this is a Git LFS pointer, not the file's content: fetch it first (git lfs pull)"
# What a damaged or truncated compressed file raises while being read.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, zstandard.ZstdError)


class _CountingFile(io.FileIO):
    """A file that counts the bytes read from disk (progress of compressed traces too)."""

    consumed = 0

    def readinto(self, buffer: Any) -> int | None:
        n = super().readinto(buffer)
        self.consumed += n or 0
        return n


class _Reader(io.BufferedReader):
    source: _CountingFile
    underlying: io.BufferedReader | None = None  # closed with this reader (gzip does not close it)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.underlying is not None:
                self.underlying.close()


class _ZstdFrames(io.RawIOBase):
    """Decompresses consecutive zstd frames; a file that ends inside a frame is an error (the
    library's stream reader would silently return what it had)."""

    def __init__(self, raw: io.BufferedReader) -> None:
        self.raw = raw
        self.frame = zstandard.ZstdDecompressor().decompressobj()
        self.in_frame = False
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            data = self.raw.read1(1 << 20)
            if not data:
                if self.in_frame:
                    raise EOFError("the zstd file ends inside a frame (truncated)")
                return 0
            while data:
                self.in_frame = True
                self.pending += self.frame.decompress(data)
                if not self.frame.eof:
                    break
                data = self.frame.unused_data
                self.frame = zstandard.ZstdDecompressor().decompressobj()
                self.in_frame = False
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()


def open_trace(path: str | Path) -> BinaryIO:
    """Opens a trace for binary reading, decompressing gzip or zstd transparently (detected from
    the magic bytes, so pipes and FIFOs work too: nothing is seeked)."""
    try:
        source = _CountingFile(path, "rb")
    except OSError as exc:
        raise TraceError(str(path), 0, f"cannot open trace: {exc.strerror or exc}") from None
    raw = _Reader(source, buffer_size=1 << 20)
    raw.source = source
    magic = raw.peek(4)[:4]
    if magic.startswith(GZIP_MAGIC):
        stream: Any = _Reader(cast(Any, gzip.GzipFile(fileobj=raw, mode="rb")), buffer_size=1 << 20)
        stream.underlying = raw
    elif magic.startswith(ZSTD_MAGIC):
        stream = _Reader(cast(Any, _ZstdFrames(raw)), buffer_size=1 << 20)
    else:
        return cast(BinaryIO, raw)
    stream.source = source
    return cast(BinaryIO, stream)


def bytes_consumed(stream: BinaryIO) -> int:
    """Bytes of the file on disk read so far by a stream from open_trace."""
    source = getattr(stream, "source", None)
    return source.consumed if isinstance(source, _CountingFile) else 0


@dataclass(frozen=True, slots=True)
class TextChunk:
    data: bytes  # whole lines; the last one may lack its '\n' only at the end of the file
    first_line: int  # 1-based number of the first line in data
    index: int  # 0-based position of the chunk in the file
    source_offset: int  # bytes of the underlying file consumed so far (for progress)


def iter_text_chunks(stream: BinaryIO, path: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[TextChunk]:
    """Yields chunks of whole lines. A leading UTF-8 byte-order mark is dropped. A damaged
    compressed file raises TraceError naming the line reached."""
    from core_c.scan import count_lines  # the engine: only where chunks are read (not in the API process)

    carry = b""
    line = 1
    index = 0
    head = True  # still looking at the first bytes (a BOM may arrive split across reads)
    while True:
        try:
            block = stream.read(chunk_bytes)
        except READ_ERRORS as exc:
            raise TraceError(path, line, f"cannot read (corrupt or truncated compressed data?): {exc}") from None
        if head:
            carry += block
            if len(carry) < len(BOM) and block and BOM.startswith(carry):
                continue
            if carry.startswith(BOM):
                carry = carry[len(BOM) :]
            if carry.startswith(LFS_POINTER):
                raise TraceError(path, 1, LFS_HINT)
            head = False
            if block:
                continue  # what is left of the first bytes waits in carry for more data
        if not block:
            if carry:
                yield TextChunk(carry, line, index, bytes_consumed(stream))
            return
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        body = data[: cut + 1]
        yield TextChunk(body, line, index, bytes_consumed(stream))
        index += 1
        line += count_lines(body)
