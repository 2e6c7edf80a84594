"""Binding of the C JSONL trace scanner (lh_trace_scan.h), its table of trace formats
(lh_trace_format.h) and the facts renderer (lh_facts.h)."""

from __future__ import annotations

import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, copied, ptr
from core_c._core import ffi, lib
from core_c.errors import CoreRangeError, new_error_buffer, parse_error_message, raise_for_status

__all__ = [
    "FORMAT_CODES",
    "ROW_READ",
    "ROW_WRITE",
    "TRACE_FORMATS",
    "ScanResult",
    "TraceFormatInfo",
    "TraceScanner",
    "format_of_keys",
    "render_facts",
]


@dataclass(frozen=True, slots=True)
class TraceFormatInfo:
    """One entry of the C format table (lh_trace_format.h)."""

    code: int  # LH_FMT_*, what TraceScanner.scan passes to C
    name: str  # "standard", "mooncake", "qwen_bailian", "publisher_log"
    default_trace_block: int  # the trace's tokens per block when the user gives none
    instanceless: bool  # rows carry no instance id
    detect_keys: tuple[str, ...]  # a row of this format has all these top-level keys
    detect_priority: int  # detection tries formats in ascending priority


def _read_format_table() -> tuple[TraceFormatInfo, ...]:
    raw = ffi.new("lh_trace_format_info *")
    entries = []
    for index in range(int(lib.lh_trace_format_count())):
        status = int(lib.lh_trace_format_get(index, raw))
        if status != lib.LH_OK:
            raise CoreRangeError(status, f"no trace format at index {index}")
        entries.append(
            TraceFormatInfo(
                code=int(raw.code),
                name=ffi.string(raw.name).decode(),
                default_trace_block=int(raw.default_trace_block),
                instanceless=bool(raw.instanceless),
                detect_keys=tuple(ffi.string(raw.detect_keys).decode().split(",")),
                detect_priority=int(raw.detect_priority),
            )
        )
    return tuple(sorted(entries, key=lambda f: f.detect_priority))


TRACE_FORMATS: tuple[TraceFormatInfo, ...] = _read_format_table()
"""Every format the scanner knows, in detection order (ascending detect_priority)."""

FORMAT_CODES = {f.name: f.code for f in sorted(TRACE_FORMATS, key=lambda f: f.code)}  # name -> LH_FMT_*
ROW_READ = int(lib.LH_ROW_READ)
ROW_WRITE = int(lib.LH_ROW_WRITE)


def format_of_keys(keys: Collection[str]) -> str | None:
    """The name of the first format (in detection order) whose detect_keys are all among the
    top-level keys of a parsed row, or None when no format matches."""
    for fmt in TRACE_FORMATS:
        if all(key in keys for key in fmt.detect_keys):
            return fmt.name
    return None


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Columns of the rows scanned from one chunk (copies owned by Python)."""

    line: Int64Array
    kind: npt.NDArray[np.uint8]
    timestamp: Int64Array
    input_len: Int64Array
    key_offsets: Int64Array
    keys: Int64Array
    id_offsets: Int64Array
    ids: bytes
    instance: npt.NDArray[np.int32]
    instance_names: list[str]
    label: npt.NDArray[np.int32]
    turn: Int64Array
    label_names: list[str]
    chat: Int64Array  # qwen_bailian: the session number of chat_id (0 in other formats)
    parent: Int64Array  # qwen_bailian: that of parent_chat_id; == chat for a root
    lines: int  # lines consumed, including blank ones and a failing one
    error_line: int  # 0 when the whole chunk was valid
    error: str  # the reason when error_line > 0


def _names(offsets: Any, data: Any, count: int) -> list[str]:
    if count == 0:
        return []
    offs = copied(offsets, count + 1, np.int64)
    raw = bytes(ffi.buffer(data, int(offs[-1]))) if offs[-1] else b""
    return [raw[offs[i] : offs[i + 1]].decode("utf-8") for i in range(count)]


def count_lines(data: bytes) -> int:
    """The b"\\n" bytes of data, as data.count(b"\\n") (lh_count_lines: memchr, several times
    faster, and outside the GIL, beside the threads that scan and replay)."""
    return int(lib.lh_count_lines(ffi.from_buffer(data), len(data))) if data else 0


class TraceScanner:
    """A reusable scanner. Not thread-safe: give each thread its own."""

    def __init__(self) -> None:
        out = ffi.new("lh_scan **")
        err = new_error_buffer()
        raise_for_status(lib.lh_scan_create(out, err, lib.LH_ERR_LEN), err)
        self._ptr: Any = out[0]
        self._finalizer = weakref.finalize(self, lib.lh_scan_destroy, self._ptr)
        self._result = ffi.new("lh_scan_result *")

    def close(self) -> None:
        self._finalizer()

    def scan(self, fmt: str, data: bytes, first_line: int, trace_block_size: int) -> ScanResult:
        """Scans whole lines in ``data``; a malformed row ends the scan (see ScanResult.error)."""
        if not self._finalizer.alive:
            raise ValueError("operation on a closed TraceScanner")
        err = new_error_buffer()
        res = self._result
        status = lib.lh_scan_chunk(
            self._ptr,
            FORMAT_CODES[fmt],
            ffi.from_buffer(data),
            len(data),
            first_line,
            trace_block_size,
            res,
            err,
            lib.LH_ERR_LEN,
        )
        message = parse_error_message(status, err)
        n = int(res.n_rows)
        return ScanResult(
            line=copied(res.line, n, np.int64),
            kind=copied(res.kind, n, np.uint8),
            timestamp=copied(res.timestamp, n, np.int64),
            input_len=copied(res.input_len, n, np.int64),
            key_offsets=copied(res.key_offsets, n + 1, np.int64),
            keys=copied(res.keys, int(res.n_keys), np.int64),
            id_offsets=copied(res.id_offsets, n + 1, np.int64),
            ids=bytes(ffi.buffer(res.ids, int(copied(res.id_offsets, n + 1, np.int64)[-1]))) if n else b"",
            instance=copied(res.instance, n, np.int32),
            instance_names=_names(res.instance_offsets, res.instance_names, int(res.n_instances)),
            label=copied(res.label, n, np.int32),
            turn=copied(res.turn, n, np.int64),
            label_names=_names(res.label_offsets, res.label_names, int(res.n_labels)),
            chat=copied(res.chat, n, np.int64),
            parent=copied(res.parent, n, np.int64),
            lines=int(res.lines),
            error_line=int(res.error_line),
            error=message,
        )


def render_facts(
    *,
    ids: bytes,
    id_offsets: Int64Array,
    timestamps: Int64Array,
    lane_ids: bytes,
    lane_id_offsets: Int64Array,
    lane_block_size: Int64Array,
    lane_block_bytes: Int64Array,
    out_src: Int64Array,
    out_lane: npt.NDArray[np.int32],
    input_lens: Int64Array,
    out_seg_lo: Int64Array,
    out_seg_hi: Int64Array,
    segments: Int64Array,
    blocks: Int64Array | None = None,
    cuts: npt.NDArray[np.uint8] | None = None,
    lane_steps: npt.NDArray[np.uint8] | None = None,
) -> bytes:
    """Facts CSV rows (no header) for output rows (out_src[k], out_lane[k]); see lh_facts.h.
    lane_steps[l] = 1: lane l's rows are byte-step ``bytes:`` rows (its segments are the points,
    thresholds as uint64 bits); None: every lane RLE."""
    n = len(out_src)
    if n == 0:
        return b""
    blocks_ptr = cuts_ptr = ffi.NULL
    extended = blocks is not None and cuts is not None
    if blocks is not None and cuts is not None:
        blocks_ptr, cuts_ptr = ptr("int64_t[]", blocks), ptr("uint8_t[]", cuts)
    args_idx = (
        ptr("int64_t[]", id_offsets),
        ptr("int64_t[]", lane_id_offsets),
        ptr("int64_t[]", out_src),
        ptr("int32_t[]", out_lane),
        ptr("int64_t[]", out_seg_lo),
        ptr("int64_t[]", out_seg_hi),
    )
    cap = int(lib.lh_facts_render_bound(*args_idx, n, int(extended)))
    buf = bytearray(cap)
    written = ffi.new("size_t *")
    err = new_error_buffer()
    segs = np.ascontiguousarray(segments, dtype=np.int64).reshape(-1)
    status = lib.lh_facts_render(
        ffi.from_buffer(ids) if ids else ffi.NULL,
        args_idx[0],
        ptr("int64_t[]", timestamps),
        ffi.from_buffer(lane_ids),
        args_idx[1],
        ptr("int64_t[]", lane_block_size),
        ptr("int64_t[]", lane_block_bytes),
        ffi.NULL if lane_steps is None else ptr("uint8_t[]", np.ascontiguousarray(lane_steps, dtype=np.uint8)),
        args_idx[2],
        args_idx[3],
        ptr("int64_t[]", input_lens),
        args_idx[4],
        args_idx[5],
        ptr("int64_t[]", segs) if len(segs) else ffi.NULL,
        int(extended),
        blocks_ptr,
        cuts_ptr,
        n,
        ffi.from_buffer(buf),
        cap,
        written,
        err,
        lib.LH_ERR_LEN,
    )
    raise_for_status(status, err)
    return bytes(memoryview(buf)[: written[0]])
