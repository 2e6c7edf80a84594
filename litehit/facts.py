"""Facts files: the header, streaming the rows in chunks through the C reader, and a global
numbering of instances across chunks.

Plain facts have the 7 original columns; extended facts add complete_blocks,cut_reason.
Any malformed row fails the whole read with FactsError naming the line (header = line 1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from core_c.query import FactsChunk, FactsReader
from litehit.errors import FactsError, TraceError
from litehit.traces.source import (
    CHUNK_BYTES,
    LFS_HINT,
    LFS_POINTER,
    READ_ERRORS,
    TextChunk,
    iter_text_chunks,
    open_trace,
)

__all__ = ["EXTENDED_HEADER", "FACTS_HEADER", "FactsStream", "InstanceIndex"]

FACTS_HEADER = b"trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve\n"
EXTENDED_HEADER = FACTS_HEADER[:-1] + b",complete_blocks,cut_reason\n"
OPEN_ROW_LIMIT = 64 << 20
"""The longest row a quoted field may make by running over chunks (a longer one is an error)."""


@dataclass
class InstanceIndex:
    """Instance ids (raw bytes) numbered in order of first appearance."""

    names: list[bytes] = field(default_factory=list)
    _index: dict[bytes, int] = field(default_factory=dict)

    def map_chunk(self, chunk: FactsChunk) -> npt.NDArray[np.int32]:
        """Per-row global instance numbers of a chunk."""
        local = chunk.instance_names()
        table = np.empty(len(local), dtype=np.int32)
        for i, name in enumerate(local):
            if name not in self._index:
                self._index[name] = len(self.names)
                self.names.append(name)
            table[i] = self._index[name]
        return table[chunk.column("instance")] if len(local) else np.empty(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.names)


class FactsStream:
    """**Usage**::

    stream = FactsStream(path)
    for chunk, groups in stream:       # groups: global instance number of every row
        ...
    stream.instances.names             # every instance seen, in order of appearance
    stream.extended                    # True for extended facts
    """

    def __init__(
        self, path: str | Path, *, chunk_bytes: int = CHUNK_BYTES, byte_steps: bool = False, what: str = ""
    ) -> None:
        """byte_steps: the reader handles hybrid lanes' byte-step rows (chunk.column("step")); without
        it the first such row is a FactsError naming its lane and `what` reads (a command)."""
        self.path = str(path)
        self.byte_steps, self.what = byte_steps, what
        self.chunk_bytes = chunk_bytes
        self.instances = InstanceIndex()
        self.extended = False
        self.rows = 0

    def __iter__(self) -> Iterator[tuple[FactsChunk, npt.NDArray[np.int32]]]:
        reader = FactsReader()
        try:
            try:
                stream = open_trace(self.path)
            except TraceError as exc:
                raise FactsError(self.path, 0, f"failed to open facts file: {exc.message}") from None
            with stream:
                try:
                    header = stream.readline()
                except READ_ERRORS as exc:  # a truncated .gz, a corrupt .zst
                    raise FactsError(
                        self.path, 0, f"cannot read (corrupt or truncated compressed data?): {exc}"
                    ) from None
                if not header:
                    raise FactsError(self.path, 0, "facts file is empty")
                if header == FACTS_HEADER:
                    self.extended = False
                elif header == EXTENDED_HEADER:
                    self.extended = True
                elif header.startswith(LFS_POINTER):
                    raise FactsError(self.path, 1, LFS_HINT)
                else:
                    raise FactsError(self.path, 1, "facts file header mismatch")
                try:
                    yield from self._chunks(reader, iter_text_chunks(stream, self.path, self.chunk_bytes))
                except TraceError as exc:
                    raise FactsError(self.path, 0, f"I/O error while reading facts file: {exc.message}") from None
        finally:
            reader.close()

    def _chunks(
        self, reader: FactsReader, texts: Iterator[TextChunk]
    ) -> Iterator[tuple[FactsChunk, npt.NDArray[np.int32]]]:
        """The rows of the text chunks (whole lines). A quoted field may hold a line break, so
        a row may run past the end of a chunk: its text then waits for the next one (a chunk
        ahead is read to know whether one follows). A read failure comes after the rows before it."""
        rest, rest_line = b"", 0  # an open row left by the previous chunk, and its line
        failure: TraceError | None = None
        text = next(texts, None)
        while text is not None:
            try:
                following = next(texts, None)
            except TraceError as exc:
                failure, following = exc, None
            data, first_line = (rest + text.data, rest_line) if rest else (text.data, text.first_line)
            more = following is not None or failure is not None  # (after a read failure: that failure)
            chunk = reader.parse(data, first_line + 1, extended=self.extended, more=more)
            if chunk.error_line:
                raise FactsError(self.path, chunk.error_line, chunk.error)
            if chunk.consumed == 0 and len(data) > OPEN_ROW_LIMIT:
                raise FactsError(
                    self.path, first_line + 1, f"a quoted field runs on over {OPEN_ROW_LIMIT >> 20} MiB (unterminated?)"
                )
            if not self.byte_steps:
                self._refuse_byte_steps(chunk)
            self.rows += chunk.rows
            rest, rest_line = data[chunk.consumed :], first_line + chunk.lines
            yield chunk, self.instances.map_chunk(chunk)
            text = following
        if failure is not None:
            raise failure

    def _refuse_byte_steps(self, chunk: FactsChunk) -> None:
        steps = np.flatnonzero(chunk.column("step"))
        if len(steps) == 0:
            return
        row = int(steps[0])
        name = chunk.instance_names()[int(chunk.column("instance")[row])].decode("utf-8", "replace")
        what = f"{self.what} reads" if self.what else "this reads"
        raise FactsError(
            self.path,
            int(chunk.column("line")[row]),
            f"instance {name} is a hybrid lane (byte-step facts): {what} Full-only facts; "
            "litehit query, curve, misses, plot and report answer it in bytes",
        )
