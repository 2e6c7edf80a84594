"""The C table of trace formats as Python sees it (core_c.scan.TRACE_FORMATS, format_of_keys)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from core_c._core import lib
from hypothesis import given, settings
from hypothesis import strategies as st

from core_c.errors import CoreInvalidArgument
from core_c.scan import FORMAT_CODES, TRACE_FORMATS, TraceFormatInfo, TraceScanner, count_lines, format_of_keys

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"

# One read row per format.
ROWS = {
    "standard": b'{"type":"get","instance_id":"i","timestamp_ns":1,"keys":[1],"input_len":16}',
    "mooncake": b'{"timestamp":1,"input_length":16,"hash_ids":[1]}',
    "qwen_bailian": b'{"chat_id":1,"timestamp":1,"input_length":16,"hash_ids":[1]}',
    "publisher_log": b'{"type":"GetCacheLocation","source":"s","trigger_time_us":1,"keys":[1]}',
}


def test_the_table_lists_every_format_in_detection_order() -> None:
    assert [f.name for f in TRACE_FORMATS] == ["qwen_bailian", "mooncake", "publisher_log", "standard"]
    assert [f.detect_priority for f in TRACE_FORMATS] == [1, 2, 3, 4]
    assert {f.name: (f.default_trace_block, f.instanceless, f.detect_keys) for f in TRACE_FORMATS} == {
        "standard": (256, False, ("type", "instance_id")),
        "mooncake": (512, True, ("hash_ids",)),
        "qwen_bailian": (16, True, ("hash_ids", "chat_id")),
        "publisher_log": (16, False, ("trigger_time_us", "source")),
    }


def test_format_codes_are_the_c_defines() -> None:
    assert FORMAT_CODES == {
        "standard": lib.LH_FMT_STANDARD,
        "mooncake": lib.LH_FMT_MOONCAKE,
        "qwen_bailian": lib.LH_FMT_QWEN,
        "publisher_log": lib.LH_FMT_PUBLISHER,
    }
    assert list(FORMAT_CODES) == ["standard", "mooncake", "qwen_bailian", "publisher_log"]


def test_entries_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TRACE_FORMATS[0].name = "other"  # type: ignore[misc]
    assert isinstance(TRACE_FORMATS[0], TraceFormatInfo)


@pytest.mark.parametrize("fmt", TRACE_FORMATS, ids=lambda f: f.name)
def test_instanceless_formats_scan_rows_without_an_instance(fmt: TraceFormatInfo) -> None:
    scanner = TraceScanner()
    result = scanner.scan(fmt.name, ROWS[fmt.name], 1, fmt.default_trace_block)
    scanner.close()
    assert result.error == "" and len(result.line) == 1
    assert (int(result.instance[0]) == -1) == fmt.instanceless
    assert format_of_keys(json.loads(ROWS[fmt.name])) == fmt.name


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("conversation_trace.jsonl", "mooncake"),
        ("synthetic_trace.jsonl", "mooncake"),
        ("event_publisher.log", "publisher_log"),
    ],
)
def test_the_first_row_of_each_bundled_trace_is_recognised(path: str, name: str) -> None:
    first = (DATA / path).read_text().splitlines()[0]
    assert format_of_keys(json.loads(first).keys()) == name


@pytest.mark.parametrize(
    ("keys", "name"),
    [
        ({"hash_ids", "chat_id", "type", "instance_id"}, "qwen_bailian"),  # qwen before everything
        ({"hash_ids", "type", "instance_id", "source", "trigger_time_us"}, "mooncake"),
        ({"trigger_time_us", "source", "type", "instance_id"}, "publisher_log"),  # before standard
        ({"type", "instance_id"}, "standard"),
        ({"chat_id", "timestamp"}, None),
        ({"trigger_time_us"}, None),
        ({"type"}, None),
        (set(), None),
    ],
)
def test_detection_applies_the_priorities(keys: set[str], name: str | None) -> None:
    assert format_of_keys(keys) == name
    assert format_of_keys(sorted(keys)) == name  # any collection of keys


def test_a_bad_block_size_raises_while_a_bad_row_is_reported() -> None:
    scanner = TraceScanner()
    with pytest.raises(CoreInvalidArgument, match="trace block size must be positive"):
        scanner.scan("mooncake", ROWS["mooncake"], 1, 0)
    result = scanner.scan("mooncake", ROWS["mooncake"] + b"\n{}", 7, 16)
    scanner.close()
    assert (len(result.line), result.error_line, result.error) == (1, 8, "missing integer field: timestamp")


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.binary(max_size=300) | st.lists(st.sampled_from([b"\n", b"x", b"\r\n", b"\x00", b"\xff"])).map(b"".join))
def test_count_lines_counts_every_newline_byte(data: bytes) -> None:
    assert count_lines(data) == data.count(b"\n")
    assert count_lines(bytearray(data)) == data.count(b"\n")
