"""Binding of the facts reader (lh_facts.h) and the batch query (lh_query.h)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import copied, ptr
from core_c._core import ffi, lib
from core_c.errors import new_error_buffer, parse_error_message, raise_for_status

__all__ = ["SLOT_BLOCKS", "SLOT_BYTES", "SLOT_INFINITE", "SLOT_TOKENS", "FactsChunk", "FactsReader", "format_g"]

SLOT_BYTES = int(lib.LH_SLOT_BYTES)  # what a capacity slot's value means (lh_query.h)
SLOT_INFINITE = int(lib.LH_SLOT_INFINITE)
SLOT_BLOCKS = int(lib.LH_SLOT_BLOCKS)
SLOT_TOKENS = int(lib.LH_SLOT_TOKENS)


@dataclass
class FactsChunk:
    """Rows parsed from one chunk of a facts file. ``table`` points into the reader's buffers and
    is valid until the reader parses again; the column accessors return copies."""

    reader: FactsReader
    table: Any
    generation: int
    error_line: int
    error: str

    def _check(self) -> Any:
        if self.generation != self.reader.generation:
            raise RuntimeError("the facts reader has parsed another chunk since")
        return self.table

    @property
    def rows(self) -> int:
        return int(self.table.n_rows)

    @property
    def lines(self) -> int:
        """Lines consumed: those of the rows read, and the empty lines."""
        return int(self.table.lines)

    @property
    def consumed(self) -> int:
        """Bytes of the data consumed (all of it, unless a bad row or an open row ended the parse)."""
        return int(self.table.consumed)

    def instance_names(self) -> list[bytes]:
        t = self._check()
        return _strings(t.instance_offsets, t.instance_names, int(t.n_instances))

    def trace_ids(self) -> list[bytes]:
        """Each row's trace_id (raw bytes, unescaped)."""
        t = self._check()
        return _strings(t.id_offsets, t.ids, int(t.n_rows))

    def column(self, name: str) -> Any:
        """A copy of one column: instance, timestamp, input_len, block_size, block_bytes, blocks,
        cut, step (1: a byte-step row, whose segs are its (threshold, hit_blocks) points with
        thresholds as uint64 bits), line (per row), seg_offsets (rows + 1) or segs (n_segs x 2)."""
        t = self._check()
        n = int(t.n_rows)
        if name == "segs":
            return copied(t.segs, 2 * int(t.n_segs), np.int64).reshape(-1, 2)
        if name == "seg_offsets":
            return copied(t.seg_offsets, n + 1, np.int64)
        dtype = {"instance": np.int32, "cut": np.uint8, "step": np.uint8}.get(name, np.int64)
        return copied(getattr(t, name), n, dtype)

    def query(
        self,
        slot_value: npt.NDArray[np.uint64],
        slot_kind: npt.NDArray[np.uint8],
        group: npt.NDArray[np.int32],
        sums: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64]],
        *,
        sink: Callable[[memoryview], object] | None = None,
    ) -> None:
        """Projects every row at every slot and adds to sums (blocks, tokens, requests, input
        tokens); slot s is slot_value[s] in the unit slot_kind[s] names (SLOT_BYTES, SLOT_INFINITE,
        SLOT_BLOCKS, SLOT_TOKENS). With ``sink``, the per-request JSONL rows are rendered and handed to it in
        pieces (the memoryview is only valid during the call)."""
        t = self._check()
        n_slots = len(slot_value)
        done = ffi.new("size_t *")
        err = new_error_buffer()
        args = (
            ptr("uint64_t[]", slot_value),
            ptr("uint8_t[]", slot_kind),
            n_slots,
            ptr("int32_t[]", group),
            ptr("uint64_t[]", sums[0]),
            ptr("uint64_t[]", sums[1]),
            ptr("uint64_t[]", sums[2]),
            ptr("uint64_t[]", sums[3]),
        )
        if sink is None:
            status = lib.lh_query_chunk(t, 0, *args, ffi.NULL, 0, ffi.NULL, done, err, lib.LH_ERR_LEN)
            raise_for_status(status, err)
            return
        buf = self.reader.render_buffer(int(lib.lh_query_row_bound(t, 0, n_slots)) if t.n_rows else 0)
        written = ffi.new("size_t *")
        row = 0
        while row < t.n_rows:
            need = int(lib.lh_query_row_bound(t, row, n_slots))
            if need > len(buf):
                buf = self.reader.render_buffer(need)
            status = lib.lh_query_chunk(
                t, row, *args, ffi.from_buffer(buf), len(buf), written, done, err, lib.LH_ERR_LEN
            )
            raise_for_status(status, err)
            row = int(done[0])
            sink(memoryview(buf)[: written[0]])


def _strings(offsets: Any, data: Any, n: int) -> list[bytes]:
    """The n byte strings data[offsets[i]:offsets[i + 1]] of a table's packed column."""
    if n == 0:
        return []
    offs = copied(offsets, n + 1, np.int64)
    raw = bytes(ffi.buffer(data, int(offs[-1]))) if offs[-1] else b""
    return [raw[offs[i] : offs[i + 1]] for i in range(n)]


class FactsReader:
    """Parses facts CSV lines in chunks. Not thread-safe."""

    def __init__(self) -> None:
        out = ffi.new("lh_facts_reader **")
        err = new_error_buffer()
        raise_for_status(lib.lh_facts_reader_create(out, err, lib.LH_ERR_LEN), err)
        self._ptr: Any = out[0]
        self._finalizer = weakref.finalize(self, lib.lh_facts_reader_destroy, self._ptr)
        self.generation = 0
        self._data: bytes = b""
        self._render = bytearray(0)

    def render_buffer(self, at_least: int) -> bytearray:
        """A reusable output buffer of at least max(at_least, 4 MiB) bytes."""
        if len(self._render) < max(at_least, 4 << 20):
            self._render = bytearray(max(at_least, 4 << 20))
        return self._render

    def close(self) -> None:
        self._finalizer()

    def parse(self, data: bytes, first_line: int, *, extended: bool, more: bool = False) -> FactsChunk:
        """Parses whole lines; a bad row ends the chunk (see FactsChunk.error_line / error).
        more: text follows data, so a row whose quoted field is still open at its end is left
        unparsed (FactsChunk.consumed stops before it)."""
        if not self._finalizer.alive:
            raise ValueError("operation on a closed FactsReader")
        self.generation += 1
        self._data = data  # the table's id/name bytes are copies, but keep the input alive anyway
        table = ffi.new("lh_facts_table *")
        err = new_error_buffer()
        status = lib.lh_facts_parse(
            self._ptr,
            ffi.from_buffer(data),
            len(data),
            first_line,
            int(extended),
            int(more),
            table,
            err,
            lib.LH_ERR_LEN,
        )
        message = parse_error_message(status, err)
        return FactsChunk(self, table, self.generation, int(table.error_line), message)


def format_g(value: float) -> str:
    """printf("%g") of a double, as the C query writes rates."""
    out = ffi.new("char[]", 32)
    n = lib.lh_format_g(value, out)
    return bytes(ffi.buffer(out, n)).decode()
