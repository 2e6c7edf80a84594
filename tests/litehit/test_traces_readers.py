"""Trace readers: the C JSONL scanner (core_c.scan.TraceScanner) and the Python input layer
(worker/traces: open_trace, iter_text_chunks, detect_format, scan_chunk), checked directly and
end to end through run_replay with exact expected facts and error texts."""

from __future__ import annotations

import csv
import gc
import gzip
import io
import json
import random
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from helpers import lane_config

import core_c
from core_c.scan import ROW_READ, ROW_WRITE, ScanResult, TraceScanner
from litehit.errors import ReplayError, TraceError
from litehit.jobs.replay import run_replay
from litehit.spec import TraceFormat, parse_replay_spec
from litehit.traces.formats import detect_format
from litehit.traces.scan import scan_chunk
from litehit.traces.source import iter_text_chunks, open_trace

HEADER = "trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve"
PUBLISHER_INSTANCE = "3780643326877293460"
INT64_MIN = -(2**63)


# ---- helpers ---------------------------------------------------------------------------------


def jl(*rows: dict[str, Any] | str) -> bytes:
    """JSON Lines: dicts are dumped compactly, strings are taken as raw lines."""
    return b"".join((r if isinstance(r, str) else json.dumps(r, separators=(",", ":"))).encode() + b"\n" for r in rows)


def get(ts: Any, keys: Any, input_len: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "get", "instance_id": "i1", "timestamp_ns": ts, "keys": keys, "input_len": input_len, **fields}


def replay_file(trace: Path, out: Path, chunk_bytes: int | None = None, **cfg: Any) -> bytes:
    """Replays ``trace`` into ``out`` and returns the facts file bytes."""
    spec = parse_replay_spec(lane_config(trace, out, **cfg))
    if chunk_bytes is None:
        run_replay(spec)
    else:
        run_replay(spec, chunk_bytes=chunk_bytes)
    return (out / "litehit_facts.csv").read_bytes()


def replay(tmp_path: Path, data: bytes, name: str = "trace.jsonl", **cfg: Any) -> bytes:
    trace = tmp_path / name
    trace.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return replay_file(trace, out, **cfg)


@dataclass(frozen=True)
class Failure:
    """What a ReplayError said. Tests keep this record, never the exception: a held exception keeps
    the replay's frames (and whatever they own) alive through its traceback."""

    text: str
    path: str | None
    line: int | None

    def __str__(self) -> str:
        return self.text


def replay_failure(trace: Path, out: Path, chunk_bytes: int | None = None, **cfg: Any) -> Failure:
    try:
        replay_file(trace, out, chunk_bytes, **cfg)
    except ReplayError as exc:
        return Failure(str(exc), exc.path, exc.line)
    raise AssertionError("the replay did not fail")


def replay_error(tmp_path: Path, data: bytes, name: str = "trace.jsonl", **cfg: Any) -> tuple[str, Failure]:
    """Replays a bad trace; returns (trace path, what the ReplayError said); checks that nothing
    was published."""
    trace = tmp_path / name
    trace.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    failure = replay_failure(trace, out, **cfg)
    assert sorted(p.name for p in out.iterdir()) == []
    return str(trace), failure


def facts_rows(facts: bytes) -> list[dict[str, str]]:
    text = facts.decode()
    assert text.startswith(HEADER + "\n")
    return list(csv.DictReader(io.StringIO(text)))


def curve_text(curve: Any) -> str:
    return json.dumps([list(seg) for seg in curve], separators=(",", ":"))


def scan(fmt: str, data: bytes, block_size: int = 16, first_line: int = 1) -> ScanResult:
    return TraceScanner().scan(fmt, data, first_line, block_size)


def row_keys(r: ScanResult, i: int) -> list[int]:
    return [int(k) for k in r.keys[r.key_offsets[i] : r.key_offsets[i + 1]]]


def row_id(r: ScanResult, i: int) -> str:
    return r.ids[r.id_offsets[i] : r.id_offsets[i + 1]].decode()


def qwen(chat_id: Any, timestamp: Any, hash_ids: list[Any], input_length: int, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "chat_id": chat_id,
        "parent_chat_id": -1,
        "timestamp": timestamp,
        "input_length": input_length,
        "output_length": 132,
        "type": "text",
        "turn": 1,
        "hash_ids": hash_ids,
    }
    row.update(fields)
    return row


def pub(kind: str, us: int, keys: list[int] | None, ident: str, source: str = "i1") -> dict[str, Any]:
    row: dict[str, Any] = {"id": ident, "source": source, "component": "cache_manager", "type": kind}
    row["trigger_time_us"] = us
    if keys is not None:
        row["keys"] = keys
    return row


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def zstd_bytes(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


SAMPLE_STANDARD = jl(
    {
        "type": "request",
        "instance_id": "i1",
        "trace_id": "r1",
        "timestamp_ns": 1000,
        "keys": [1, 2, 3],
        "input_len": 50,
        "query_type": "prefix_match",
        "block_mask": [],
    },
    {
        "type": "get",
        "instance_id": "i1",
        "trace_id": "",
        "timestamp_ns": 2000,
        "tokens": [],
        "keys": [1, 2, 9],
        "input_len": 48,
        "query_type": "prefix_match",
        "block_mask": [],
        "sw_size": 0,
        "location_spec_names": [],
    },
    {"type": "write", "instance_id": "i1", "trace_id": "w1", "timestamp_ns": 2001, "keys": [1, 2, 9], "ttl_us": 0},
    {"type": "get", "instance_id": "i1", "trace_id": "g3", "timestamp_ns": 2001, "keys": [1, 2, 3], "input_len": 63},
)
SAMPLE_STANDARD_FACTS = (
    HEADER + "\n"
    'r1,i1,1000,50,16,8192,"[]"\n'
    'trace_i1_2000,i1,2000,48,16,8192,"[[1,2]]"\n'
    'g3,i1,2001,63,16,8192,"[[1,2],[4,1]]"\n'
).encode()


def mooncake_slice(lines: int) -> bytes:
    data = (Path(__file__).resolve().parents[2] / "examples/data/conversation_trace.jsonl").read_bytes()
    return b"".join(data.splitlines(keepends=True)[:lines])


# ---- 1. standard rows ------------------------------------------------------------------------


def test_standard_reads_produce_facts_and_writes_are_ignored(tmp_path: Path) -> None:
    assert replay(tmp_path, SAMPLE_STANDARD) == SAMPLE_STANDARD_FACTS


def test_standard_scan_columns(tmp_path: Path) -> None:
    r = scan("standard", SAMPLE_STANDARD)
    assert r.error_line == 0
    assert r.error == ""
    assert r.lines == 4
    assert list(r.line) == [1, 2, 3, 4]
    assert list(r.kind) == [ROW_READ, ROW_READ, ROW_WRITE, ROW_READ]
    assert list(r.timestamp) == [1000, 2000, 2001, 2001]
    assert list(r.input_len) == [50, 48, 0, 63]
    assert [row_keys(r, i) for i in range(4)] == [[1, 2, 3], [1, 2, 9], [], [1, 2, 3]]
    assert [row_id(r, i) for i in range(4)] == ["r1", "trace_i1_2000", "w1", "g3"]
    assert r.instance_names == ["i1"]
    assert list(r.instance) == [0, 0, 0, 0]


@pytest.mark.parametrize("trace_id", [None, ""])
def test_standard_missing_or_empty_trace_id_is_synthesized(tmp_path: Path, trace_id: str | None) -> None:
    extra = {} if trace_id is None else {"trace_id": trace_id}
    facts = replay(tmp_path, jl(get(123456789012345, [7], 20, **extra)))
    assert facts_rows(facts)[0]["trace_id"] == "trace_i1_123456789012345"


def test_standard_uint64_keys_are_reinterpreted_as_int64() -> None:
    r = scan("standard", jl(get(1, [18446744073709551615, 9223372036854775808, 9223372036854775807, -5], 64)))
    assert r.error_line == 0
    assert row_keys(r, 0) == [-1, INT64_MIN, 2**63 - 1, -5]


def test_standard_uint64_key_hits_its_int64_twin(tmp_path: Path) -> None:
    facts = replay(tmp_path, jl(get(1, [-1, INT64_MIN], 32), get(2, [18446744073709551615, 9223372036854775808], 32)))
    assert [row["hit_curve"] for row in facts_rows(facts)] == ["[]", "[[1,2]]"]


@pytest.mark.parametrize(
    "tokens",
    [[], [1, 2, 3], "text", {"a": [1, {"b": None}]}, None, 1.5, True, 10**30, [[["deep"]]]],
)
def test_standard_tokens_of_any_type_and_unknown_fields_are_ignored(tmp_path: Path, tokens: Any) -> None:
    plain = replay(tmp_path, SAMPLE_STANDARD)
    noisy = jl(
        *(
            {**json.loads(line), "tokens": tokens, "unknown_field": {"x": [1, "y", None]}, "zz": -(10**40)}
            for line in SAMPLE_STANDARD.splitlines()
        )
    )
    assert replay(tmp_path, noisy) == plain


@pytest.mark.parametrize(
    "fields",
    [
        {"block_mask": [True, False]},
        {"block_mask": 3},
        {"sw_size": -1},
        {"sw_size": 2**31 - 1},
        {"location_spec_names": ["tp0", "tp1"]},
        {"ttl_us": -1},
        {"query_type": "batch_get"},
        {"trace_id": "ünï\u2028"},
    ],
)
def test_standard_optional_fields_of_the_right_type_are_accepted(tmp_path: Path, fields: dict[str, Any]) -> None:
    facts = replay(tmp_path, jl(get(5, [1, 2], 40, **fields)))
    row = facts_rows(facts)[0]
    assert (row["timestamp_ns"], row["input_token_len"], row["hit_curve"]) == ("5", "40", "[]")


def test_blank_lines_are_skipped_but_counted() -> None:
    data = b"\n   \n\t\r\n" + jl(get(10, [1], 16)) + b"  \r\n\n" + jl(get(11, [1], 16)) + b" \t"
    r = scan("standard", data)
    assert r.error_line == 0
    assert list(r.line) == [4, 7]
    assert r.lines == 8


def test_blank_lines_count_in_error_line_numbers(tmp_path: Path) -> None:
    data = b"\n \n" + jl(get(10, [1], 16)) + b"\t\r\n" + jl({"type": "get"})
    path, err = replay_error(tmp_path, data)
    assert str(err) == f"failed to load/replay trace: {path}:5: missing non-empty string field: instance_id"
    assert err.line == 5


def test_crlf_line_endings(tmp_path: Path) -> None:
    crlf = SAMPLE_STANDARD.replace(b"\n", b"\r\n")
    assert replay(tmp_path, crlf) == SAMPLE_STANDARD_FACTS
    assert replay(tmp_path, crlf, fmt="standard") == SAMPLE_STANDARD_FACTS


@pytest.mark.parametrize("fmt", [None, "standard"])
def test_utf8_bom_at_file_start_is_accepted(tmp_path: Path, fmt: str | None) -> None:
    assert replay(tmp_path, b"\xef\xbb\xbf" + SAMPLE_STANDARD, fmt=fmt) == SAMPLE_STANDARD_FACTS


def test_utf8_bom_before_leading_blank_lines(tmp_path: Path) -> None:
    assert replay(tmp_path, b"\xef\xbb\xbf\r\n\n" + SAMPLE_STANDARD) == SAMPLE_STANDARD_FACTS


def test_last_line_without_newline(tmp_path: Path) -> None:
    assert replay(tmp_path, SAMPLE_STANDARD.rstrip(b"\n")) == SAMPLE_STANDARD_FACTS


# ---- 2. standard error messages ----------------------------------------------------------------

STANDARD_ERRORS: list[tuple[dict[str, Any] | str, str]] = [
    ({"instance_id": "i1", "timestamp_ns": 3000, "keys": [], "input_len": 16}, "missing string field: type"),
    (get(3000, [1], 16, type=5), "missing string field: type"),
    (get(3000, [1], 16, type="foo"), "unknown trace type: foo"),
    (get(3000, [1], 16, type="GET"), "unknown trace type: GET"),
    ({"type": "get", "timestamp_ns": 3000, "keys": [], "input_len": 16}, "missing non-empty string field: instance_id"),
    (get(3000, [1], 16, instance_id=""), "missing non-empty string field: instance_id"),
    (get(3000, [1], 16, instance_id=7), "missing non-empty string field: instance_id"),
    ({"type": "get", "instance_id": "i1", "keys": [], "input_len": 16}, "missing integer field: timestamp_ns"),
    (get(1.5, [1], 16), "missing integer field: timestamp_ns (got a non-integer number)"),
    (get("3000", [1], 16), "missing integer field: timestamp_ns (got a string)"),
    (get(2**63, [1], 16), "integer field out of range: timestamp_ns"),
    (get(10**30, [1], 16), "integer field out of range: timestamp_ns"),
    ({"type": "get", "instance_id": "i1", "timestamp_ns": 3000, "input_len": 16}, "missing array field: keys"),
    (get(3000, "1,2", 16), "missing array field: keys"),
    ({"type": "get", "instance_id": "i1", "timestamp_ns": 3000, "keys": []}, "missing integer field: input_len"),
    (get(3000, [1], 16.0), "non-integer field: input_len"),
    (get(3000, [1], "16"), "non-integer field: input_len"),
    (get(3000, [1, "x"], 16), "failed to parse get trace (keys[1] is a string, expected a 64-bit integer)"),
    (get(3000, [1.5], 16), "failed to parse get trace (keys[0] is a non-integer number, expected a 64-bit integer)"),
    (
        get(3000, [1, 2, 2**64], 48),
        "failed to parse get trace (keys[2] is an integer out of the 64-bit range, expected a 64-bit integer)",
    ),
    (get(3000, [1], 16, trace_id=5), "failed to parse get trace (trace_id must be a string)"),
    (get(3000, [1], 16, type="request", query_type=1), "failed to parse request trace (query_type must be a string)"),
    (
        get(3000, [1], 16, block_mask=[1]),
        "failed to parse get trace (block_mask must be an array of booleans or a non-negative integer)",
    ),
    (
        get(3000, [1], 16, block_mask=-1),
        "failed to parse get trace (block_mask must be an array of booleans or a non-negative integer)",
    ),
    (get(3000, [1], 16, sw_size=2**31), "failed to parse get trace (sw_size must be a 32-bit integer)"),
    (
        get(3000, [1], 16, location_spec_names=[1]),
        "failed to parse get trace (location_spec_names must be an array of strings)",
    ),
    (get(3000, [1], 16, ttl_us=1.5), "failed to parse get trace (ttl_us must be a 64-bit integer)"),
    (get(3000, [1], 0), "failed to parse get trace (input_len must be positive, got 0)"),
    (get(3000, [1], -16, type="request"), "failed to parse request trace (input_len must be positive, got -16)"),
    (
        {"type": "write", "instance_id": "i1", "timestamp_ns": 3000, "keys": [1, "k"]},
        "failed to parse write trace (keys[1] is a string, expected a 64-bit integer)",
    ),
    (get(0, [1], 16), "failed to validate trace: timestamp_ns must be positive, got 0"),
    (
        {"type": "write", "instance_id": "i1", "timestamp_ns": -5, "keys": []},
        "failed to validate trace: timestamp_ns must be positive, got -5",
    ),
    ('{"type":"get",', "invalid JSON: expected a field name at column 15"),
    ("[1, 2]", "invalid JSON: expected a JSON object at column 1"),
    ('{"type":"get"} {}', "invalid JSON: trailing characters after the object at column 16"),
    ('{"type":"g\\x"}', "invalid JSON: bad escape in string at column 13"),
]


@pytest.mark.parametrize(("row", "message"), STANDARD_ERRORS)
def test_standard_error_message_names_path_and_line(tmp_path: Path, row: dict[str, Any] | str, message: str) -> None:
    data = jl(get(1000, [1], 16)) + b"\n" + jl(row, get(4000, [1], 16))
    path, err = replay_error(tmp_path, data)
    assert str(err) == f"failed to load/replay trace: {path}:3: {message}"
    assert (err.path, err.line) == (path, 3)


@pytest.mark.parametrize(("row", "message"), STANDARD_ERRORS)
def test_standard_scanner_error_keeps_rows_before_it(row: dict[str, Any] | str, message: str) -> None:
    r = scan("standard", jl(get(1000, [1], 16), get(2000, [2, 3], 40), row, get(4000, [1], 16)), first_line=10)
    assert (r.error_line, r.error) == (12, message)
    assert list(r.line) == [10, 11]
    assert r.keys.tolist() == [1, 2, 3]
    assert r.lines == 3


def test_unsorted_timestamp_names_trace_id_and_line(tmp_path: Path) -> None:
    path, err = replay_error(tmp_path, jl(get(2000, [1], 16), get(2000, [1], 16), get(1999, [1], 16, trace_id="b")))
    assert str(err) == f"trace is not sorted by timestamp_ns at trace_id[b] ({path}:3)"
    assert err.line == 3


def test_unsorted_write_row_is_an_error(tmp_path: Path) -> None:
    write = {"type": "write", "instance_id": "i1", "trace_id": "w", "timestamp_ns": 1500, "keys": [1]}
    path, err = replay_error(tmp_path, jl(get(2000, [1], 16), write))
    assert str(err) == f"trace is not sorted by timestamp_ns at trace_id[w] ({path}:2)"


def test_first_failure_in_input_order_wins(tmp_path: Path) -> None:
    path, err = replay_error(tmp_path, jl(get(2000, [1], 16), get(1000, [1], 16, trace_id="early"), {"type": 1}))
    assert str(err) == f"trace is not sorted by timestamp_ns at trace_id[early] ({path}:2)"


def test_file_without_reads_fails(tmp_path: Path) -> None:
    _, err = replay_error(tmp_path, jl({"type": "write", "instance_id": "i1", "timestamp_ns": 5, "keys": [1]}))
    assert str(err) == "trace contains no valid Request/Get events"


def test_failed_replay_keeps_an_older_facts_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "litehit_facts.csv").write_bytes(b"older facts\n")
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(jl(get(1000, [1], 16), {"type": "foo", "instance_id": "i1"}))
    with pytest.raises(ReplayError, match=r":2: unknown trace type: foo$"):
        replay_file(trace, out)
    assert sorted(p.name for p in out.iterdir()) == ["litehit_facts.csv"]
    assert (out / "litehit_facts.csv").read_bytes() == b"older facts\n"


def scan_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("litehit"))


@pytest.mark.parametrize("chunk_bytes", [None, 64])
def test_failed_replay_stops_its_scan_threads(tmp_path: Path, chunk_bytes: int | None) -> None:
    """Regression: run_replay once left the scanning generator (and its thread pool) suspended
    after a ReplayError; a caller holding the exception kept the pool alive until the cyclic GC
    finalized it at an arbitrary point, which could deadlock inside threading internals."""
    before = scan_threads()
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(many_rows(50) + jl({"type": "foo", "instance_id": "i1"}) + many_rows(50))
    held: list[BaseException] = []
    try:
        replay_file(trace, tmp_path, chunk_bytes)
    except ReplayError as exc:
        held.append(exc)
    assert len(held) == 1
    assert scan_threads() == before
    held.clear()


def test_error_reason_is_one_line_even_with_escaped_newline_in_value(tmp_path: Path) -> None:
    _, err = replay_error(tmp_path, jl(get(1000, [1], 16), get(2000, [1], 16, type="a\nb")))
    assert "\n" not in str(err)


# ---- 3. mooncake -------------------------------------------------------------------------------

MOONCAKE_ROWS = jl(
    {"timestamp": 10**12 + 7, "input_length": 1030, "output_length": 5, "hash_ids": [11, 12, 13]},
    {"timestamp": 10**12 + 7, "input_length": 1024, "output_length": 5, "hash_ids": [11, 12]},
    "",
    {"timestamp": 10**12 + 8, "input_length": 511, "output_length": 5, "hash_ids": [99]},
    {"timestamp": 9223372036854, "input_length": 2047, "output_length": 5, "hash_ids": [11, 12, 14, 15]},
)


def test_mooncake_scan_truncates_keys_and_numbers_rows_by_line() -> None:
    r = scan("mooncake", MOONCAKE_ROWS, block_size=512)
    assert r.error_line == 0
    assert [row_keys(r, i) for i in range(4)] == [[11, 12], [11, 12], [], [11, 12, 14]]
    assert [row_id(r, i) for i in range(4)] == ["1", "2", "4", "5"]
    assert r.timestamp.tolist() == [
        (10**12 + 7) * 1_000_000,
        (10**12 + 7) * 1_000_000,
        (10**12 + 8) * 1_000_000,
        9223372036854 * 1_000_000,
    ]
    assert r.input_len.tolist() == [1030, 1024, 511, 2047]
    assert r.instance.tolist() == [-1, -1, -1, -1]
    assert r.instance_names == []


def test_mooncake_replay_facts(tmp_path: Path) -> None:
    facts = replay(tmp_path, MOONCAKE_ROWS, block_size=512, lane_block=512)
    assert facts.decode() == (
        HEADER + "\n"
        '1,i1,1000000000007000000,1030,512,8192,"[]"\n'
        '2,i1,1000000000007000000,1024,512,8192,"[[1,2]]"\n'
        '4,i1,1000000000008000000,511,512,8192,"[]"\n'
        '5,i1,9223372036854000000,2047,512,8192,"[[1,2]]"\n'
    )


def test_mooncake_example_matches_golden_curves(tmp_path: Path, data_dir: Path) -> None:
    facts = replay_file(data_dir / "conversation_trace.jsonl", tmp_path, block_size=512, lane_block=512)
    rows = facts_rows(facts)
    golden = (data_dir / "conversation_b512.curves").read_text().splitlines()
    assert len(rows) == len(golden) == 12031
    assert [row["hit_curve"] for row in rows] == golden
    assert [row["trace_id"] for row in rows[:3]] == ["1", "2", "3"]


NON_INTEGER = "(got a non-integer number)"
MOONCAKE_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"input_length": 40, "hash_ids": [1, 2]}, "missing integer field: timestamp"),
    ({"timestamp": 7, "hash_ids": [1, 2]}, "missing integer field: input_length"),
    ({"timestamp": 7, "input_length": 40}, "missing array field: hash_ids"),
    ({"timestamp": 7, "input_length": 40, "hash_ids": 5}, "missing array field: hash_ids"),
    ({"timestamp": 7.5, "input_length": 40, "hash_ids": [1, 2]}, f"missing integer field: timestamp {NON_INTEGER}"),
    ({"timestamp": 7, "input_length": -1, "hash_ids": []}, "input_length must not be negative, got -1"),
    ({"timestamp": 7, "input_length": 40.0, "hash_ids": [1, 2]}, f"missing integer field: input_length {NON_INTEGER}"),
    ({"timestamp": 7, "input_length": 40, "hash_ids": [1, "a"]}, "hash_ids[1] is a string, expected a 64-bit integer"),
    (
        {"timestamp": 7, "input_length": 40, "hash_ids": [1, 2.5]},
        "hash_ids[1] is a non-integer number, expected a 64-bit integer",
    ),
    ({"timestamp": -1, "input_length": 40, "hash_ids": [1, 2]}, "timestamp must not be negative, got -1"),
    (
        {"timestamp": 9223372036855, "input_length": 40, "hash_ids": [1, 2]},
        "timestamp 9223372036855 ms overflows int64 nanoseconds",
    ),
    ({"timestamp": 10**30, "input_length": 40, "hash_ids": [1, 2]}, "integer field out of range: timestamp"),
]


@pytest.mark.parametrize(("row", "message"), MOONCAKE_ERRORS)
def test_mooncake_errors_name_the_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    data = jl({"timestamp": 5, "input_length": 40, "hash_ids": [1, 2, 3]}, "", row)
    path, err = replay_error(tmp_path, data)
    assert str(err) == f"failed to load/replay trace: {path}:3: {message}"


def test_mooncake_too_few_hash_ids_breaks_the_length_contract(tmp_path: Path) -> None:
    data = jl(
        {"timestamp": 5, "input_length": 40, "hash_ids": [1, 2, 3]},
        {"timestamp": 6, "input_length": 40, "hash_ids": [1]},
    )
    path, err = replay_error(tmp_path, data)
    assert str(err) == (
        "invalid request trace_id[2]: NormalizeRequest block_keys must contain exactly "
        f"floor(input_token_len / trace_block_size) blocks ({path}:2)"
    )


# ---- 4. qwen_bailian ---------------------------------------------------------------------------

QWEN_IDS = list(range(1000, 1033))  # 33 ids for 521 tokens: 32 full blocks of 16 and a tail


def test_qwen_scan_columns() -> None:
    data = jl(
        qwen(159, 61.114, QWEN_IDS, 521),
        qwen("chat-x", 62, QWEN_IDS[:2], 32, type="image", turn=7),
        qwen(-3, 63.5, [], 15, type=None, turn=None),
    )
    r = scan("qwen_bailian", data)
    assert r.error_line == 0
    assert [row_id(r, i) for i in range(3)] == ["159", "chat-x", "-3"]
    assert r.timestamp.tolist() == [int(61.114 * 1_000_000_000), 62_000_000_000, 63_500_000_000]
    assert [row_keys(r, i) for i in range(3)] == [QWEN_IDS[:32], QWEN_IDS[:2], []]
    assert r.input_len.tolist() == [521, 32, 15]
    assert r.label_names == ["text", "image"]
    assert r.label.tolist() == [0, 1, -1]
    assert r.turn.tolist() == [1, 7, 0]


def test_qwen_float_timestamps_follow_python_float_arithmetic(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    stamps = [61.114, 0.1, 0.3, 1e-9, 2.5e-10, 1700000000.123456, 9.2e9, 4503599627.370497]
    stamps += [rng.uniform(0, 100) for _ in range(300)]
    stamps += [rng.uniform(0, 9.2e9) for _ in range(300)]
    stamps += [rng.randrange(0, 10**12) / 1000 for _ in range(300)]
    stamps.sort()
    data = jl(*(qwen(i, ts, [i], 16) for i, ts in enumerate(stamps)))
    facts = facts_rows(replay(tmp_path, data))
    assert [int(row["timestamp_ns"]) for row in facts] == [int(ts * 1_000_000_000) for ts in stamps]
    assert [row["trace_id"] for row in facts] == [str(i) for i in range(len(stamps))]


def test_qwen_integer_timestamps_are_exact(tmp_path: Path) -> None:
    stamps = [0, 1, 61, 9_007_199_254, 9_223_372_036]
    facts = facts_rows(replay(tmp_path, jl(*(qwen(i, ts, [i], 16) for i, ts in enumerate(stamps)))))
    assert [int(row["timestamp_ns"]) for row in facts] == [ts * 1_000_000_000 for ts in stamps]
    assert facts[-1]["timestamp_ns"] == "9223372036000000000"


QWEN_SEQUENCE = [[1, 2, 3, 50], [2, 1, 3, 51], [1, 2, 3, 52]]  # 60 tokens: 3 full blocks + tail id


def expected_curves(key_lists: list[list[int]]) -> list[str]:
    with core_c.Lane() as lane:
        return [curve_text(lane.process(keys, i + 1)) for i, keys in enumerate(key_lists)]


def qwen_sequence() -> bytes:
    return jl(*(qwen(i, 1.0 + i, ids, 60) for i, ids in enumerate(QWEN_SEQUENCE)))


def test_qwen_keys_are_prefix_hashed_by_default(tmp_path: Path) -> None:
    hashed = expected_curves([core_c.prefix_hash(ids[: 60 // 16]).tolist() for ids in QWEN_SEQUENCE])
    raw = expected_curves([ids[: 60 // 16] for ids in QWEN_SEQUENCE])
    assert hashed != raw  # the sequence tells the two apart
    facts = facts_rows(replay(tmp_path, qwen_sequence()))
    assert [row["hit_curve"] for row in facts] == hashed == ["[]", "[]", "[[4,3]]"]


def test_qwen_explicit_prefix_hash_false_is_honoured(tmp_path: Path) -> None:
    cfg = lane_config(tmp_path / "trace.jsonl", tmp_path)
    cfg["instance_groups"][0]["enable_prefix_hash"] = False
    (tmp_path / "trace.jsonl").write_bytes(qwen_sequence())
    run_replay(parse_replay_spec(cfg))
    facts = facts_rows((tmp_path / "litehit_facts.csv").read_bytes())
    assert [row["hit_curve"] for row in facts] == expected_curves([ids[:3] for ids in QWEN_SEQUENCE])
    assert [row["hit_curve"] for row in facts] == ["[]", "[[2,3]]", "[[2,3]]"]


def test_qwen_repeated_request_curve_equals_lane_on_prefix_hash(tmp_path: Path) -> None:
    ids = [rng_id * 7919 for rng_id in range(1, 40)]
    keys = core_c.prefix_hash(ids[: 600 // 16]).tolist()
    facts = facts_rows(replay(tmp_path, jl(qwen(1, 1.0, ids, 600), qwen(2, 2.0, ids, 600))))
    assert [row["hit_curve"] for row in facts] == expected_curves([keys, keys])
    assert facts[1]["hit_curve"] == "[[1,37]]"


QWEN_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"timestamp": 1.5, "input_length": 16, "hash_ids": [1]}, "missing field: chat_id"),
    (qwen(1.5, 1.5, [1], 16), "chat_id must be an integer or a string, got a non-integer number"),
    (qwen(None, 1.5, [1], 16), "chat_id must be an integer or a string, got null"),
    (qwen(1, "1.5", [1], 16), "missing number field: timestamp"),
    (qwen(1, -0.5, [1], 16), "timestamp must not be negative"),
    (qwen(1, -1, [1], 16), "timestamp must not be negative"),
    (qwen(1, 1e300, [1], 16), "timestamp overflows int64 nanoseconds"),
    (qwen(1, 9_223_372_037, [1], 16), "timestamp overflows int64 nanoseconds"),
    (qwen(1, 1.5, [1], -16), "input_length must not be negative, got -16"),
    (qwen(1, 1.5, [1, None], 16), "hash_ids[1] is null, expected a 64-bit integer"),
    (qwen(1, 1.5, [1], 16, type=5), "type must be a string"),
    (qwen(1, 1.5, [1], 16, turn="1"), "turn must be an integer"),
]


@pytest.mark.parametrize(("row", "message"), QWEN_ERRORS)
def test_qwen_errors_name_the_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path, err = replay_error(tmp_path, jl(qwen(0, 1.0, [1], 16), row))
    assert str(err) == f"failed to load/replay trace: {path}:2: {message}"


def test_qwen_uint64_chat_id_becomes_its_decimal_string() -> None:
    r = scan("qwen_bailian", jl(qwen(18446744073709551615, 1.0, [1], 16)))
    assert r.error == ""
    assert row_id(r, 0) == "18446744073709551615"


# ---- 5. publisher_log --------------------------------------------------------------------------


def test_publisher_example_log(tmp_path: Path, data_dir: Path) -> None:
    log = data_dir / "event_publisher.log"
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    reads = [e for e in events if e["type"] == "GetCacheLocation"]
    assert len(reads) == 102
    assert {e["type"] for e in events} == {"GetCacheLocation", "StartWriteCache", "FinishWriteCache"}
    facts = facts_rows(replay_file(log, tmp_path, instance=PUBLISHER_INSTANCE))
    assert len(facts) == len(reads)
    assert [row["trace_id"] for row in facts] == [e["id"] for e in reads]
    assert [int(row["input_token_len"]) for row in facts] == [16 * len(e["keys"]) for e in reads]
    assert [int(row["timestamp_ns"]) for row in facts] == [e["trigger_time_us"] * 1000 for e in reads]
    assert {row["instance_id"] for row in facts} == {PUBLISHER_INSTANCE}
    assert {row["block_size_tokens"] for row in facts} == {"16"}


def test_publisher_example_log_scan_kinds(data_dir: Path) -> None:
    log = (data_dir / "event_publisher.log").read_bytes()
    kinds = [json.loads(line)["type"] for line in log.splitlines()]
    r = scan("publisher_log", log)
    assert r.error_line == 0
    assert r.lines == len(kinds)
    expected = [(n, k) for n, k in enumerate(kinds, start=1) if k != "FinishWriteCache"]
    assert r.line.tolist() == [n for n, _ in expected]
    assert r.kind.tolist() == [ROW_READ if k == "GetCacheLocation" else ROW_WRITE for _, k in expected]
    assert set(r.input_len.tolist()) == {0}
    assert r.instance_names == [PUBLISHER_INSTANCE]


PUBLISHER_LOG = jl(
    pub("GetCacheLocation", 100, [1, 2], "a"),
    pub("StartWriteCache", 101, [1, 2, 3], "w"),
    pub("FinishWriteCache", 102, None, "f"),
    pub("GetCacheLocation", 103, [1, 2, 3], "b"),
)
PUBLISHER_FACTS = (HEADER + '\na,i1,100000,32,16,8192,"[]"\nb,i1,103000,48,16,8192,"[[1,2]]"\n').encode()


def test_publisher_small_log(tmp_path: Path) -> None:
    assert replay(tmp_path, PUBLISHER_LOG) == PUBLISHER_FACTS


@pytest.mark.parametrize(
    "event",
    [
        pub("FinishWriteCache", 100, [1, 2, 3], "f"),
        pub("Heartbeat", 100, None, "h"),
        pub("Heartbeat", 100, [], "h"),
        {**pub("Heartbeat", 100, None, "h"), "keys": None},
        {"type": "Heartbeat", "whatever": {"x": 1}},
    ],
)
def test_publisher_events_without_keys_are_skipped(tmp_path: Path, event: dict[str, Any]) -> None:
    lines = PUBLISHER_LOG.splitlines(keepends=True)
    data = lines[0] + jl(event) + b"".join(lines[1:])
    assert replay(tmp_path, data) == PUBLISHER_FACTS


@pytest.mark.parametrize("keys", [[1], [1.5], "abc", {}])
def test_publisher_unknown_event_with_keys_fails_naming_its_line(tmp_path: Path, keys: Any) -> None:
    lines = PUBLISHER_LOG.splitlines(keepends=True)
    data = b"".join(lines[:3]) + jl({**pub("EvictCache", 102, None, "e"), "keys": keys}) + lines[3]
    path, err = replay_error(tmp_path, data)
    assert str(err) == (
        f"failed to load/replay trace: {path}:4: unsupported event type EvictCache with keys "
        "(expected GetCacheLocation or StartWriteCache)"
    )


PUBLISHER_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"source": "i1", "trigger_time_us": 5, "keys": [1]}, "missing string field: type"),
    (pub("GetCacheLocation", 200, [1], "x", source=""), "missing non-empty string field: source"),
    (
        {**pub("GetCacheLocation", 200, [1], "x"), "trigger_time_us": 1.5},
        f"missing integer field: trigger_time_us {NON_INTEGER}",
    ),
    (pub("GetCacheLocation", 0, [1], "x"), "trigger_time_us must be positive, got 0"),
    (pub("StartWriteCache", 9223372036854776, [1], "x"), "trigger_time_us overflows int64 nanoseconds"),
    (pub("GetCacheLocation", 200, None, "x"), "missing array field: keys"),
    (pub("GetCacheLocation", 200, [1, "k"], "x"), "keys[1] is a string, expected a 64-bit integer"),
    ({**pub("GetCacheLocation", 200, [1], "x"), "id": 5}, "id must be a string"),
]


@pytest.mark.parametrize(("row", "message"), PUBLISHER_ERRORS)
def test_publisher_errors_name_the_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path, err = replay_error(tmp_path, PUBLISHER_LOG + jl(row))
    assert str(err) == f"failed to load/replay trace: {path}:5: {message}"


def test_publisher_source_picks_the_lane(tmp_path: Path) -> None:
    path, err = replay_error(tmp_path, PUBLISHER_LOG + jl(pub("GetCacheLocation", 200, [1], "z", source="other")))
    assert str(err) == f"unknown instance[other] at trace_id[z] ({path}:5)"


# ---- 6. compression ----------------------------------------------------------------------------

FORMAT_SAMPLES: dict[str, tuple[bytes, dict[str, Any]]] = {
    "standard": (SAMPLE_STANDARD, {}),
    "mooncake": (MOONCAKE_ROWS, {"block_size": 512, "lane_block": 512}),
    "qwen_bailian": (qwen_sequence(), {}),
    "publisher_log": (PUBLISHER_LOG, {}),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
@pytest.mark.parametrize("explicit", [False, True])
def test_gzip_and_zstd_traces_give_identical_facts(tmp_path: Path, fmt: str, explicit: bool) -> None:
    data, cfg = FORMAT_SAMPLES[fmt]
    if explicit:
        cfg = {**cfg, "fmt": fmt}
    plain = replay(tmp_path, data, **cfg)
    # No telling extension: compression is detected from the magic bytes.
    assert replay(tmp_path, gzip_bytes(data), name="trace.gz.jsonl", **cfg) == plain
    assert replay(tmp_path, zstd_bytes(data), name="trace.zst.jsonl", **cfg) == plain
    assert len(facts_rows(plain)) >= 2


def test_compressed_example_log_gives_identical_facts(tmp_path: Path, data_dir: Path) -> None:
    data = (data_dir / "event_publisher.log").read_bytes()
    plain = replay(tmp_path, data, instance=PUBLISHER_INSTANCE)
    assert replay(tmp_path, gzip_bytes(data), name="log.gz", instance=PUBLISHER_INSTANCE) == plain
    assert replay(tmp_path, zstd_bytes(data), name="log.zst", instance=PUBLISHER_INSTANCE) == plain


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
def test_format_detection_on_compressed_files(tmp_path: Path, fmt: str) -> None:
    data = b"\n  \n" + FORMAT_SAMPLES[fmt][0]
    for name, blob in [("t.gz", gzip_bytes(data)), ("t.zst", zstd_bytes(data)), ("t.jsonl", data)]:
        (tmp_path / name).write_bytes(blob)
        assert detect_format(tmp_path / name) == TraceFormat(fmt)


def test_open_trace_decompresses_transparently(tmp_path: Path) -> None:
    for name, blob in [("a", SAMPLE_STANDARD), ("b", gzip_bytes(SAMPLE_STANDARD)), ("c", zstd_bytes(SAMPLE_STANDARD))]:
        (tmp_path / name).write_bytes(blob)
        with open_trace(tmp_path / name) as stream:
            assert stream.read() == SAMPLE_STANDARD


def test_open_missing_trace_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot open trace"):
        open_trace(tmp_path / "missing.jsonl")
    (tmp_path / "out").mkdir()
    for fmt in (None, "standard"):
        with pytest.raises(ReplayError, match=r"^failed to load/replay trace: .*missing\.jsonl: cannot open trace"):
            replay_file(tmp_path / "missing.jsonl", tmp_path / "out", fmt=fmt)


def test_multi_member_gzip_and_multi_frame_zstd_are_read_whole(tmp_path: Path) -> None:
    lines = SAMPLE_STANDARD.splitlines(keepends=True)
    half = b"".join(lines[:2]), b"".join(lines[2:])
    assert replay(tmp_path, gzip_bytes(half[0]) + gzip_bytes(half[1]), name="t.gz") == SAMPLE_STANDARD_FACTS
    assert replay(tmp_path, zstd_bytes(half[0]) + zstd_bytes(half[1]), name="t.zst") == SAMPLE_STANDARD_FACTS


def resource_warnings(action: Callable[[], object]) -> list[str]:
    """ResourceWarnings (unclosed files) raised while running action and collecting garbage."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def read_and_close(path: Path) -> None:
    with open_trace(path) as stream:
        assert stream.read() == SAMPLE_STANDARD


@pytest.mark.parametrize("name", ["t.jsonl", "t.zst", "t.gz"])
def test_open_trace_closes_the_file(tmp_path: Path, name: str) -> None:
    """Regression: a GzipFile does not close a fileobj it was given; open_trace once leaked it."""
    blobs = {"t.jsonl": SAMPLE_STANDARD, "t.zst": zstd_bytes(SAMPLE_STANDARD), "t.gz": gzip_bytes(SAMPLE_STANDARD)}
    blob = blobs[name]
    (tmp_path / name).write_bytes(blob)
    assert resource_warnings(lambda: read_and_close(tmp_path / name)) == []
    assert resource_warnings(lambda: replay_file(tmp_path / name, tmp_path)) == []


def many_rows(n: int) -> bytes:
    return b"".join(jl(get(i + 1, [i % 5, 100 + i % 3], 40, trace_id=f"t{i}")) for i in range(n))


@pytest.mark.parametrize("rows", [3, 20000])
def test_truncated_gzip_fails_with_replay_error(tmp_path: Path, rows: int) -> None:
    blob = gzip_bytes(many_rows(rows))
    path, err = replay_error(tmp_path, blob[: len(blob) // 2], name="t.gz", fmt="standard")
    assert str(err).startswith(f"failed to load/replay trace: {path}:")
    assert (
        "cannot read (corrupt or truncated compressed data?): Compressed file ended before the end-of-stream marker"
        in str(err)
    )


def test_gzip_crc_mismatch_fails_with_replay_error(tmp_path: Path) -> None:
    blob = bytearray(gzip_bytes(SAMPLE_STANDARD))
    blob[-8] ^= 0x01  # CRC32 of the member
    path, err = replay_error(tmp_path, bytes(blob), name="t.gz", fmt="standard")
    assert str(err).startswith(
        f"failed to load/replay trace: {path}:1: cannot read (corrupt or truncated compressed data?): CRC check"
    )


def test_truncated_small_gzip_without_trace_format_fails_with_replay_error(tmp_path: Path) -> None:
    blob = gzip_bytes(SAMPLE_STANDARD)
    replay_error(tmp_path, blob[: len(blob) // 2], name="t.gz")


@pytest.mark.parametrize("fmt", [None, "standard"])
def test_corrupt_gzip_body_fails_with_replay_error(tmp_path: Path, fmt: str | None) -> None:
    blob = bytearray(gzip_bytes(many_rows(200)))
    for i in range(12, len(blob) - 8):
        blob[i] ^= 0x55
    replay_error(tmp_path, bytes(blob), name="t.gz", fmt=fmt)


def test_corrupt_zstd_with_explicit_format_fails_with_replay_error(tmp_path: Path) -> None:
    blob = bytearray(zstd_bytes(many_rows(3000)))
    for i in range(20, len(blob) - 4, 3):
        blob[i] ^= 0xA5
    path, err = replay_error(tmp_path, bytes(blob), name="t.zst", fmt="standard")
    assert str(err).startswith(
        f"failed to load/replay trace: {path}:1: cannot read (corrupt or truncated compressed data?): zstd"
    )


def test_corrupt_zstd_without_trace_format_fails_with_replay_error(tmp_path: Path) -> None:
    blob = bytearray(zstd_bytes(many_rows(3000)))
    for i in range(20, len(blob) - 4, 3):
        blob[i] ^= 0xA5
    replay_error(tmp_path, bytes(blob), name="t.zst")


@pytest.mark.parametrize("fmt", [None, "standard"])
def test_truncated_zstd_fails_with_replay_error(tmp_path: Path, fmt: str | None) -> None:
    lines = SAMPLE_STANDARD.splitlines(keepends=True)
    second = zstd_bytes(b"".join(lines[2:]))
    blob = zstd_bytes(b"".join(lines[:2])) + second[: len(second) // 2]
    replay_error(tmp_path, blob, name="t.zst", fmt=fmt)


# ---- 7. detection ------------------------------------------------------------------------------

DETECTION_ROWS: list[tuple[dict[str, Any], TraceFormat]] = [
    (get(1, [1], 16), TraceFormat.STANDARD),
    ({"type": "write", "instance_id": "i1"}, TraceFormat.STANDARD),
    ({"timestamp": 0, "input_length": 1, "hash_ids": []}, TraceFormat.MOONCAKE),
    (qwen(1, 1.0, [1], 16), TraceFormat.QWEN_BAILIAN),
    (pub("FinishWriteCache", 5, None, "f"), TraceFormat.PUBLISHER_LOG),
    (pub("GetCacheLocation", 5, [1], "g"), TraceFormat.PUBLISHER_LOG),
]


@pytest.mark.parametrize(("row", "fmt"), DETECTION_ROWS)
def test_detect_format_from_first_non_blank_row(tmp_path: Path, row: dict[str, Any], fmt: TraceFormat) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"\xef\xbb\xbf \r\n\n\t\n" + jl(row) + b"not json at all\n")
    assert detect_format(trace) == fmt


def test_detect_format_looks_only_at_the_first_row(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(jl({"timestamp": 0, "input_length": 1, "hash_ids": []}, get(1, [1], 16)))
    assert detect_format(trace) == TraceFormat.MOONCAKE


@pytest.mark.parametrize("data", [b"", b"\n\n  \r\n\t", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n \n"])
def test_empty_file_fails_with_no_traces_loaded(tmp_path: Path, data: bytes) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(data)
    assert detect_format(trace) is None
    for fmt in (None, "standard", "mooncake"):
        path, err = replay_error(tmp_path, data, name="t.jsonl", fmt=fmt)
        assert str(err) == f"failed to load/replay trace: No optimizer traces loaded from file: {path}"


@pytest.mark.parametrize("name", ["t.gz", "t.zst"])
def test_empty_compressed_file_fails_with_no_traces_loaded(tmp_path: Path, name: str) -> None:
    blob = gzip_bytes(b"\n") if name.endswith("gz") else zstd_bytes(b"")
    path, err = replay_error(tmp_path, blob, name=name)
    assert str(err) == f"failed to load/replay trace: No optimizer traces loaded from file: {path}"


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ('{"a": 1, "b": 2}', "cannot detect the trace format from this row (fields ['a', 'b']); set trace_format"),
        ('{"type": "get"}', "cannot detect the trace format from this row (fields ['type']); set trace_format"),
        ("[1, 2]", "cannot detect the trace format from this row (fields list); set trace_format"),
        ('{"type": "get",', "cannot detect the trace format: invalid JSON"),
        ('{"type": "g\xff"}', "cannot detect the trace format: invalid JSON"),
    ],
)
def test_undetectable_first_row_names_its_line(tmp_path: Path, line: str, detail: str) -> None:
    data = b"\n \n" + line.encode("latin-1") + b"\n" + jl(get(1, [1], 16))
    path, err = replay_error(tmp_path, data)
    assert str(err).startswith(f"failed to load/replay trace: {path}:3: {detail}")
    assert err.line == 3


def test_deeply_nested_first_row_without_trace_format_fails_with_replay_error(tmp_path: Path) -> None:
    path, err = replay_error(tmp_path, b'{"type":"get","instance_id":"i1","x":' + b"[" * 10000 + b"\n")
    assert f"{path}:1:" in str(err)


def test_huge_integer_in_first_row_without_trace_format_fails_with_replay_error(tmp_path: Path) -> None:
    row = b'{"type":"get","instance_id":"i1","timestamp_ns":' + b"9" * 5000 + b',"keys":[],"input_len":1}\n'
    path, err = replay_error(tmp_path, row)
    assert f"{path}:1:" in str(err)


def test_deeply_nested_row_with_explicit_format_names_its_line(tmp_path: Path) -> None:
    path, err = replay_error(tmp_path, jl(get(1, [1], 16)) + b'{"x":' + b"[" * 10000 + b"\n", fmt="standard")
    assert str(err) == f"failed to load/replay trace: {path}:2: invalid JSON: nesting too deep at column 261"


# ---- 8. chunking -------------------------------------------------------------------------------


def chunk_all(data: bytes, chunk_bytes: int) -> list[Any]:
    return list(iter_text_chunks(io.BytesIO(data), "mem", chunk_bytes))


def scan_chunks(data: bytes, fmt: TraceFormat, chunk_bytes: int, block_size: int = 16) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for chunk in iter_text_chunks(io.BytesIO(data), "mem", chunk_bytes):
        r = scan_chunk(chunk, fmt, block_size).rows
        assert r.error_line == 0, r.error
        rows += [
            (int(r.line[i]), int(r.kind[i]), int(r.timestamp[i]), int(r.input_len[i]), row_keys(r, i), row_id(r, i))
            for i in range(len(r.line))
        ]
    return rows


@pytest.mark.parametrize("chunk_bytes", [1, 2, 7, 64, 1 << 20])
def test_iter_text_chunks_cuts_whole_lines_with_first_line_numbers(chunk_bytes: int) -> None:
    data = b"\n" + SAMPLE_STANDARD + b"\r\n\n" + SAMPLE_STANDARD.rstrip(b"\n")
    chunks = chunk_all(data, chunk_bytes)
    assert b"".join(c.data for c in chunks) == data
    assert [c.index for c in chunks] == list(range(len(chunks)))
    line = 1
    for c in chunks[:-1]:
        assert c.data.endswith(b"\n")
        assert c.first_line == line
        line += c.data.count(b"\n")
    assert chunks[-1].first_line == line
    assert not chunks[-1].data.endswith(b"\n")


@pytest.mark.parametrize(
    ("fmt", "data", "block_size"),
    [
        (TraceFormat.STANDARD, b"\n \n" + SAMPLE_STANDARD + b"\r\n" + SAMPLE_STANDARD.replace(b"\n", b"\r\n"), 16),
        (TraceFormat.MOONCAKE, MOONCAKE_ROWS, 512),
        (TraceFormat.QWEN_BAILIAN, qwen_sequence() + b"\n" + qwen_sequence(), 16),
        (TraceFormat.PUBLISHER_LOG, PUBLISHER_LOG, 16),
    ],
)
def test_tiny_chunks_give_the_same_rows_and_lines(fmt: TraceFormat, data: bytes, block_size: int) -> None:
    whole = scan_chunks(data, fmt, 1 << 20, block_size)
    assert len(whole) >= 3
    for chunk_bytes in (1, 7, 64):
        assert scan_chunks(data, fmt, chunk_bytes, block_size) == whole


def test_tiny_chunks_of_compressed_streams(tmp_path: Path) -> None:
    (tmp_path / "t.gz").write_bytes(gzip_bytes(SAMPLE_STANDARD))
    (tmp_path / "t.zst").write_bytes(zstd_bytes(SAMPLE_STANDARD))
    for name in ("t.gz", "t.zst"):
        with open_trace(tmp_path / name) as stream:
            chunks = list(iter_text_chunks(stream, name, 7))
        assert b"".join(c.data for c in chunks) == SAMPLE_STANDARD
        assert [c.first_line for c in chunks] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("data", "cfg"),
    [
        (SAMPLE_STANDARD * 1, {}),
        (b"\n" + many_rows(300) + b"  \n" + many_rows(0), {}),
        (mooncake_slice(600), {"block_size": 512, "lane_block": 512}),
        (mooncake_slice(600), {"block_size": 512, "lane_block": 1024, "ttl": 60}),
        (qwen_sequence(), {}),
        (PUBLISHER_LOG, {}),
    ],
)
def test_replay_with_tiny_chunks_gives_identical_facts(tmp_path: Path, data: bytes, cfg: dict[str, Any]) -> None:
    default = replay(tmp_path, data, **cfg)
    assert replay(tmp_path, data, chunk_bytes=64, **cfg) == default
    assert replay(tmp_path, data, chunk_bytes=7, **cfg) == default


def test_example_log_with_tiny_chunks_gives_identical_facts(tmp_path: Path, data_dir: Path) -> None:
    log = data_dir / "event_publisher.log"
    default = replay_file(log, tmp_path, instance=PUBLISHER_INSTANCE)
    assert replay_file(log, tmp_path, chunk_bytes=64, instance=PUBLISHER_INSTANCE) == default


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ({"type": "nope", "instance_id": "i1"}, "failed to load/replay trace: {path}:{line}: unknown trace type: nope"),
        (get(1, [1], 16, trace_id="late"), "trace is not sorted by timestamp_ns at trace_id[late] ({path}:{line})"),
        (
            get(10**9, [1], 32, trace_id="short"),
            "invalid request trace_id[short]: NormalizeRequest block_keys must "
            "contain exactly floor(input_token_len / trace_block_size) blocks ({path}:{line})",
        ),
        (get(10**9, [1], 16, instance_id="i9", trace_id="u"), "unknown instance[i9] at trace_id[u] ({path}:{line})"),
    ],
)
def test_replay_with_tiny_chunks_reports_the_same_error_line(
    tmp_path: Path, bad: dict[str, Any], expected: str
) -> None:
    lines = many_rows(120).splitlines(keepends=True)
    data = b"".join(lines[:77]) + b"\n" + jl(bad) + b"".join(lines[77:])
    for chunk_bytes in (7, 64, 1000, None):
        path, err = replay_error(tmp_path, data, chunk_bytes=chunk_bytes)
        assert str(err) == expected.format(path=path, line=79)
        assert err.line == 79


@pytest.mark.parametrize("chunk_bytes", [4, 5, 7, 64])
def test_bom_with_small_chunks(tmp_path: Path, chunk_bytes: int) -> None:
    assert replay(tmp_path, b"\xef\xbb\xbf" + SAMPLE_STANDARD, chunk_bytes=chunk_bytes) == SAMPLE_STANDARD_FACTS


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3])
def test_bom_with_chunks_smaller_than_the_bom(tmp_path: Path, chunk_bytes: int) -> None:
    assert replay(tmp_path, b"\xef\xbb\xbf" + SAMPLE_STANDARD, chunk_bytes=chunk_bytes) == SAMPLE_STANDARD_FACTS
