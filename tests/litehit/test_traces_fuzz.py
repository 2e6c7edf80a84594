"""Fuzzing the trace readers: valid rows of every format are mutated (truncated JSON, wrong
types, huge and negative numbers, floats, nested junk, invalid UTF-8 and NUL bytes, deep nesting,
unsorted timestamps) and fed to the C scanner and to run_replay.

Properties: the scanner never crashes and either accepts the file or stops exactly at the
mutated row with a reason; run_replay only ever raises ReplayError naming that row's line (for
unsorted timestamps: its trace id and line) and publishes nothing, leaving an older facts file
byte-identical."""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from helpers import lane_config
from hypothesis import given, settings
from hypothesis import strategies as st

from core_c.scan import ROW_READ, ROW_WRITE, TraceScanner
from litehit.errors import ReplayError
from litehit.jobs.replay import run_replay
from litehit.spec import parse_replay_spec

FORMATS = ("standard", "mooncake", "qwen_bailian", "publisher_log")
INT64_MAX = 2**63 - 1
SENTINEL = b"trace_id,older facts that must survive a failed replay\n"
SCANNER = TraceScanner()  # reused across examples: a failed scan must not poison the next one

# NUL and bytes that never occur in UTF-8: a line holding one of them is invalid wherever it sits
# (inside a string or between tokens), whatever bytes surround it.
POISON_BYTES = [b"\x00", b"\xff", b"\xfe", b"\xc0", b"\xc1", b"\xf5", b"\xf8"]


# ---- helpers ---------------------------------------------------------------------------------


def dumps(row: dict[str, Any]) -> bytes:
    return json.dumps(row, separators=(",", ":")).encode()


def is_write(fmt: str, n: int) -> bool:
    return fmt in ("standard", "publisher_log") and n % 3 == 2


def base_row(fmt: str, n: int) -> dict[str, Any]:
    """The n-th (1-based) valid row of a format: sorted timestamps, 2 full blocks of 16 tokens."""
    if fmt == "standard":
        if is_write(fmt, n):
            return {"type": "write", "instance_id": "i1", "trace_id": f"t{n}", "timestamp_ns": 1000 * n, "keys": [n]}
        return {
            "type": "get",
            "instance_id": "i1",
            "trace_id": f"t{n}",
            "timestamp_ns": 1000 * n,
            "keys": [n, n + 1],
            "input_len": 40,
            "tokens": [],
            "query_type": "prefix_match",
        }
    if fmt == "mooncake":
        return {"timestamp": 10 * n, "input_length": 40, "output_length": 7, "hash_ids": [n, n + 1, n + 2]}
    if fmt == "qwen_bailian":
        return {
            "chat_id": n,
            "parent_chat_id": -1,
            "timestamp": n + 0.25,
            "input_length": 40,
            "output_length": 3,
            "type": "text",
            "turn": 1,
            "hash_ids": [n, n + 1, n + 2],
        }
    kind = "StartWriteCache" if is_write(fmt, n) else "GetCacheLocation"
    return {
        "id": f"r{n}",
        "source": "i1",
        "component": "cache_manager",
        "type": kind,
        "trigger_time_us": 10 * n,
        "keys": [n, n + 1],
    }


def trace_id(fmt: str, n: int, line: int) -> str:
    return {"standard": f"t{n}", "mooncake": str(line), "qwen_bailian": str(n), "publisher_log": f"r{n}"}[fmt]


TIMESTAMP_FIELD = {
    "standard": "timestamp_ns",
    "mooncake": "timestamp",
    "qwen_bailian": "timestamp",
    "publisher_log": "trigger_time_us",
}

# Values that make a field of a row invalid for the scanner, whatever else the row holds.
BAD_VALUES: dict[str, dict[str, list[Any]]] = {
    "standard": {
        "type": [None, 5, 1.5, [], {}, True, "", "foo", "GET", "Write"],
        "instance_id": [None, "", 7, [], {}, False],
        "timestamp_ns": [None, 1.5, 1e3, "1000", 10**30, -(10**30), 2**63, 0, -1, [], {}, True],
        "keys": [None, 5, "1,2", {}, [1.5], ["a"], [10**30], [-(10**30)], [None], [[1]], [True], [1, 2**64]],
        "input_len": [None, 0, -40, 40.0, "40", 10**30, -(10**30), 2**63, [], True],
        "trace_id": [5, None, [], {}, 1.5, True],
        "query_type": [1, [], None],
        "block_mask": [[1], -1, "x", 1.5, None, 2**63, [None]],
        "sw_size": [2**31, -(2**31) - 1, 1.5, "0", None],
        "location_spec_names": [[1], "a", None, [None]],
        "ttl_us": [1.5, "0", 10**30, None],
    },
    "mooncake": {
        "timestamp": [None, 1.5, "10", 10**30, -(10**30), -1, 2**63, 9223372036855, [], True],
        "input_length": [None, -1, -40, 40.0, "40", 10**30, -(10**30), 2**63, [], False],
        "hash_ids": [None, 5, "x", {}, [1.5], ["a"], [10**30], [None], [[]], [{}]],
    },
    "qwen_bailian": {
        "chat_id": [None, 1.5, [], {}, True],
        "timestamp": [None, "1", -1, -0.5, 1e300, 10**30, -(10**30), 9223372037, [], True, {}],
        "input_length": [None, -1, 40.0, "40", 10**30, [], True],
        "hash_ids": [None, 5, "x", {}, [1.5], ["a"], [10**30], [None]],
        "type": [5, [], {}, 1.5, True],
        "turn": ["1", 1.5, 10**30, [], {}, True],
    },
    "publisher_log": {
        "type": [None, 5, [], "Foo", "getcachelocation"],
        "source": [None, "", 5, []],
        "trigger_time_us": [None, 0, -1, 1.5, "10", 10**30, -(10**30), 9223372036854776, []],
        "keys": [None, 5, "x", {}, [1.5], ["a"], [10**30]],
        "id": [5, None, [], 1.5],
    },
}
REQUIRED = {
    "standard": ["type", "instance_id", "timestamp_ns", "keys", "input_len"],
    "mooncake": ["timestamp", "input_length", "hash_ids"],
    "qwen_bailian": ["chat_id", "timestamp", "input_length", "hash_ids"],
    "publisher_log": ["type", "source", "trigger_time_us", "keys"],
}
IGNORED = {
    "standard": ["tokens", "unknown"],
    "mooncake": ["output_length", "unknown"],
    "qwen_bailian": ["output_length", "parent_chat_id", "unknown"],
    "publisher_log": ["component", "query_type", "unknown"],
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@dataclass(frozen=True)
class Case:
    fmt: str
    data: bytes
    bad_line: int  # physical line of the mutated row
    bad_id: str  # trace id of the mutated row
    kind: str
    scan_error: bool  # the scanner must stop at bad_line
    must_fail: bool  # the replay must fail naming bad_line
    good_lines: list[int]  # physical lines of the rows before the mutated one that make records


def mutate_row(draw: Any, fmt: str, n: int, row: dict[str, Any], prev: dict[str, Any] | None) -> tuple[bytes, str]:
    """(the mutated row text, the kind of mutation)."""
    kinds = ["bad_value", "drop_field", "truncate", "poison_bytes", "deep_nesting", "maybe_value", "maybe_ignored"]
    if prev is not None:
        kinds.append("unsorted")
    kind = draw(st.sampled_from(kinds))
    text = dumps(row)
    if kind == "bad_value":
        table = BAD_VALUES[fmt]
        fields = [f for f in table if not (f == "input_len" and is_write(fmt, n))]
        field = draw(st.sampled_from(fields))
        row = {**row, field: draw(st.sampled_from(table[field]))}
        return dumps(row), kind
    if kind == "drop_field":
        fields = [f for f in REQUIRED[fmt] if not (f == "input_len" and is_write(fmt, n))]
        field = draw(st.sampled_from(fields))
        return dumps({k: v for k, v in row.items() if k != field}), kind
    if kind == "truncate":
        return text[: draw(st.integers(1, len(text) - 1))], kind
    if kind == "poison_bytes":
        junk = draw(st.binary(max_size=6)).replace(b"\n", b"")
        poison = draw(st.sampled_from(POISON_BYTES))
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, len(junk)))
        return text[:at] + junk[:cut] + poison + junk[cut:] + text[at:], kind
    if kind == "deep_nesting":
        depth = draw(st.sampled_from([256, 300, 10000]))
        field = draw(st.sampled_from([*REQUIRED[fmt], "tokens", "x"]))
        closed = draw(st.booleans())
        value = b"[" * depth + (b"]" * depth if closed else b"")
        deep = b'"' + field.encode() + b'":' + value
        return (text[:-1] + b"," + deep + b"}" if draw(st.booleans()) else b"{" + deep + b"," + text[1:]), kind
    if kind == "unsorted":
        assert prev is not None
        field = TIMESTAMP_FIELD[fmt]
        before = prev[field]
        row = {**row, field: before - (0.125 if isinstance(before, float) else draw(st.integers(1, 9)))}
        return dumps(row), kind
    # "maybe" mutations may leave the row valid; they never touch the timestamp, so a failure can
    # only be this row's (length contract, unknown instance, wrong type...).
    if kind == "maybe_value":
        fields = [f for f in row if f != TIMESTAMP_FIELD[fmt]]
        row = {**row, draw(st.sampled_from(fields)): draw(json_values)}
    else:
        row = {**row, draw(st.sampled_from(IGNORED[fmt])): draw(json_values)}
    return dumps(row), kind


@st.composite
def mutated_traces(draw: Any, first_row_clean: bool = False) -> Case:
    fmt = draw(st.sampled_from(FORMATS))
    count = draw(st.integers(3, 6))
    bad = draw(st.integers(2 if first_row_clean else 1, count))
    lines: list[bytes] = []
    good_lines: list[int] = []
    bad_line = 0
    kind = ""
    for n in range(1, count + 1):
        lines += [draw(st.sampled_from([b"", b"  ", b"\t\r"])) for _ in range(draw(st.integers(0, 2)))]
        row = base_row(fmt, n)
        if n == bad:
            prev = base_row(fmt, n - 1) if n > 1 else None
            text, kind = mutate_row(draw, fmt, n, row, prev)
            lines.append(text)
            bad_line = len(lines)
        else:
            lines.append(dumps(row))
            if n < bad:
                good_lines.append(len(lines))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = eol.join(lines) + draw(st.sampled_from([b"", eol]))
    scan_error = kind not in ("unsorted", "maybe_value", "maybe_ignored")
    return Case(
        fmt=fmt,
        data=data,
        bad_line=bad_line,
        bad_id=trace_id(fmt, bad, bad_line),
        kind=kind,
        scan_error=scan_error,
        must_fail=kind not in ("maybe_value", "maybe_ignored"),
        good_lines=good_lines,
    )


def check_scan(case: Case) -> None:
    r = SCANNER.scan(case.fmt, case.data, 1, 16)
    if case.scan_error:
        assert r.error_line == case.bad_line
    else:
        assert r.error_line in (0, case.bad_line)
    if r.error_line:
        assert r.error.strip() != ""
        assert r.lines == r.error_line
        assert all(line < r.error_line for line in r.line.tolist())
    assert r.line.tolist()[: len(case.good_lines)] == case.good_lines
    assert set(r.kind.tolist()) <= {ROW_READ, ROW_WRITE}
    assert len(r.key_offsets) == len(r.line) + 1
    assert r.key_offsets[-1] == len(r.keys)


def compress(data: bytes, how: str) -> bytes:
    if how == "gz":
        return gzip.compress(data, mtime=0)
    if how == "zst":
        return zstandard.ZstdCompressor().compress(data)
    return data


@dataclass(frozen=True)
class Failure:
    """What a ReplayError said (the exception itself is not kept: its traceback holds the frames
    of the replay)."""

    text: str
    path: str | None
    line: int | None

    def __str__(self) -> str:
        return self.text


def run_case(data: bytes, *, fmt: str | None, chunk_bytes: int | None, keep_older: bool) -> tuple[str, Any]:
    """Replays data in a fresh directory; returns (trace path, Failure or the facts bytes).
    Checks that a failed replay publishes nothing and keeps an older facts file intact."""
    with tempfile.TemporaryDirectory() as tmp:
        trace, out = Path(tmp) / "trace", Path(tmp) / "out"
        trace.write_bytes(data)
        out.mkdir()
        if keep_older:
            (out / "litehit_facts.csv").write_bytes(SENTINEL)
        spec = parse_replay_spec(lane_config(trace, out, fmt=fmt))
        failure = None
        try:
            if chunk_bytes is None:
                run_replay(spec)
            else:
                run_replay(spec, chunk_bytes=chunk_bytes)
        except ReplayError as exc:
            failure = Failure(str(exc), exc.path, exc.line)
        if failure is None:
            return str(trace), (out / "litehit_facts.csv").read_bytes()
        left = sorted(p.name for p in out.iterdir())
        if keep_older:
            assert left == ["litehit_facts.csv"]
            assert (out / "litehit_facts.csv").read_bytes() == SENTINEL
        else:
            assert left == []
        return str(trace), failure


def check_replay_error(case: Case, path: str, err: Failure) -> None:
    text = str(err)
    if case.scan_error:
        assert text.startswith(f"failed to load/replay trace: {path}:{case.bad_line}: "), text
    elif case.kind == "unsorted":
        assert text == f"trace is not sorted by timestamp_ns at trace_id[{case.bad_id}] ({path}:{case.bad_line})"
    else:
        assert f"{path}:{case.bad_line}" in text, text
    assert err.line == case.bad_line
    assert err.path == path


# ---- scanner -------------------------------------------------------------------------------


@settings(max_examples=1500, deadline=None, database=None)
@given(case=mutated_traces())
def test_scanner_stops_exactly_at_the_mutated_row(case: Case) -> None:
    check_scan(case)


@settings(max_examples=600, deadline=None, database=None)
@given(
    fmt=st.sampled_from(FORMATS),
    lines=st.lists(st.binary(max_size=40), max_size=8),
    first_line=st.integers(1, 10**12),
)
def test_scanner_survives_random_bytes(fmt: str, lines: list[bytes], first_line: int) -> None:
    lines = [line.replace(b"\n", b"") for line in lines]
    data = b"\n".join(lines)
    r = SCANNER.scan(fmt, data, first_line, 16)
    if r.error_line:
        assert first_line <= r.error_line < first_line + len(lines)
        assert r.error.strip() != ""
        assert r.lines == r.error_line - first_line + 1
        for offset in range(r.error_line - first_line):
            line = first_line + offset
            assert lines[offset].strip(b" \t\r") == b"" or line in r.line.tolist()
    else:
        assert r.lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


JSONISH = st.text(alphabet='{}[]":,0123456789-+.eE tfnrulabsy\\/\t\r\x00\x7f\u00e9\u2028\U0001f600', max_size=60)


@settings(max_examples=800, deadline=None, database=None)
@given(fmt=st.sampled_from(FORMATS), text=JSONISH, prefix=st.sampled_from(["", "{", '{"keys":', '{"type":"get","a":']))
def test_scanner_survives_json_like_text(fmt: str, text: str, prefix: str) -> None:
    data = (prefix + text).encode("utf-8", "surrogatepass").replace(b"\n", b"")
    r = SCANNER.scan(fmt, data, 7, 16)
    if r.error_line:
        assert r.error_line == 7
        assert r.error.strip() != ""
        assert len(r.line) == 0
    else:
        assert r.lines <= 1


@settings(max_examples=200, deadline=None, database=None)
@given(fmt=st.sampled_from(FORMATS), depth=st.integers(1, 20000), closed=st.booleans())
def test_scanner_deep_nesting(fmt: str, depth: int, closed: bool) -> None:
    row = dumps(base_row(fmt, 1))
    deep = b"[" * depth + (b"]" * depth if closed else b"")
    data = row + b"\n" + row[:-1] + b',"x":' + deep + b"}\n" + row
    r = SCANNER.scan(fmt, data, 1, 16)
    if closed and depth <= 255:
        assert r.error_line == 0
        assert r.line.tolist() == [1, 2, 3]
    else:
        assert r.error_line == 2
        assert r.error.startswith("invalid JSON: ")
        assert r.line.tolist() == [1]


# ---- standard rows against a Python model of the row rules -------------------------------------


def _int64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v <= INT64_MAX


def standard_model(row: dict[str, Any]) -> tuple[int, int, int, list[int], str] | None:
    """(kind, timestamp_ns, input_len, keys, trace_id) of a valid standard row, None if invalid."""
    t, inst, ts, keys = row.get("type"), row.get("instance_id"), row.get("timestamp_ns"), row.get("keys")
    if t not in ("get", "request", "write") or not isinstance(inst, str) or not inst or not _int64(ts):
        return None
    if not isinstance(keys, list):
        return None
    read = t != "write"
    length = row.get("input_len")
    if read and not _int64(length):
        return None
    if not all(isinstance(k, int) and not isinstance(k, bool) and -(2**63) <= k < 2**64 for k in keys):
        return None
    checks = {
        "trace_id": lambda v: isinstance(v, str),
        "query_type": lambda v: isinstance(v, str),
        "block_mask": lambda v: (isinstance(v, list) and all(isinstance(b, bool) for b in v)) or (_int64(v) and v >= 0),
        "sw_size": lambda v: _int64(v) and -(2**31) <= v < 2**31,
        "location_spec_names": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
        "ttl_us": _int64,
    }
    if any(name in row and not ok(row[name]) for name, ok in checks.items()):
        return None
    if (read and length <= 0) or ts <= 0:
        return None
    tid = row.get("trace_id") or f"trace_{inst}_{ts}"
    wrapped = [k - 2**64 if k > INT64_MAX else k for k in keys] if read else []
    return (ROW_READ if read else ROW_WRITE, ts, length if read else 0, wrapped, tid)


STANDARD_FIELDS = {
    "type": st.sampled_from(["get", "request", "write", "foo", ""]) | json_values,
    "instance_id": st.sampled_from(["i1", "ü", ""]) | json_values,
    "timestamp_ns": st.integers(-5, 2**64) | json_values,
    "keys": st.lists(st.integers(-(2**63), 2**64 - 1), max_size=4) | json_values,
    "input_len": st.integers(-5, 2**63) | json_values,
    "trace_id": st.text(max_size=5) | json_values,
    "query_type": json_values,
    "block_mask": st.lists(st.booleans(), max_size=3) | json_values,
    "sw_size": st.integers(-(2**32), 2**32) | json_values,
    "location_spec_names": st.lists(st.text(max_size=3), max_size=2) | json_values,
    "ttl_us": json_values,
    "tokens": json_values,
}


@st.composite
def standard_rows(draw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, values in STANDARD_FIELDS.items():
        if draw(st.integers(0, 9)) < (8 if name in ("type", "instance_id", "timestamp_ns", "keys", "input_len") else 3):
            row[name] = draw(values)
    return row


@settings(max_examples=1500, deadline=None, database=None)
@given(row=standard_rows(), ensure_ascii=st.booleans())
def test_standard_scanner_matches_the_row_rules(row: dict[str, Any], ensure_ascii: bool) -> None:
    text = json.dumps(row, ensure_ascii=ensure_ascii).encode()
    r = SCANNER.scan("standard", text, 1, 16)
    want = standard_model(row)
    if want is None:
        assert r.error_line == 1
        assert r.error != ""
        return
    assert r.error_line == 0, r.error
    got = (
        int(r.kind[0]),
        int(r.timestamp[0]),
        int(r.input_len[0]),
        r.keys.tolist(),
        r.ids.decode(),
    )
    assert got == want
    assert r.instance_names == [row["instance_id"]]


# A key as JSON spells it: the scanner's short path (plain digits) and its general number reader
# must read the same integers and refuse the same texts.
KEY_SPELLINGS = (
    st.integers(0, 10**6).map(str)
    | st.integers(-(2**63), 2**64 - 1).map(str)
    | st.integers(17, 21).flatmap(lambda n: st.integers(10 ** (n - 1), 10**n - 1)).map(str)
    | st.sampled_from(["0", "-0", "00", "01", "1.5", "1.0", "2e3", "2E3", "2e+3", "7.", "1e", "-", "+1", "1x", "0x1"])
)


@settings(max_examples=600, deadline=None, database=None)
@given(
    spellings=st.lists(KEY_SPELLINGS, max_size=5),
    seps=st.lists(st.sampled_from([",", ", ", " ,", "\t,\r ", ",", ",,"]), min_size=4, max_size=4),
    close=st.sampled_from(["]", " ]", "", "]]"]),
)
def test_key_arrays_read_every_number_spelling_as_json_does(spellings: list[str], seps: list[str], close: str) -> None:
    keys = "".join(k + (seps[i % len(seps)] if i < len(spellings) - 1 else "") for i, k in enumerate(spellings))
    text = f'{{"type":"get","instance_id":"i1","timestamp_ns":5,"input_len":64,"keys":[{keys}{close}}}'.encode()
    try:
        row = json.loads(text)
    except ValueError:
        row = None
    want = None if row is None else standard_model(row)
    bad = (
        []
        if row is None
        else [(i, k) for i, k in enumerate(row["keys"]) if not (isinstance(k, int) and -(2**63) <= k < 2**64)]
    )
    for data in (text, text + b"\n"):
        r = SCANNER.scan("standard", data, 1, 16)
        if want is None:
            assert r.error_line == 1 and r.error != "", data
            if bad:  # a number JSON reads but a key cannot be: the first one is named, and why
                i, k = bad[0]
                why = "a non-integer number" if isinstance(k, float) else "an integer out of the 64-bit range"
                assert f"keys[{i}] is {why}" in r.error, (data, r.error)
        else:
            assert r.error_line == 0, (data, r.error)
            assert r.keys.tolist() == want[3]


# ---- end to end ---------------------------------------------------------------------------------

replay_options = {
    "fmt_explicit": st.booleans(),
    "chunk_bytes": st.sampled_from([None, 7, 64, 4096]),
    "compression": st.sampled_from(["plain", "plain", "gz", "zst"]),
    "keep_older": st.booleans(),
}


@settings(max_examples=400, deadline=None, database=None)
@given(case=mutated_traces(), **replay_options)
def test_replay_fails_only_with_replay_error_naming_the_row(
    case: Case, fmt_explicit: bool, chunk_bytes: int | None, compression: str, keep_older: bool
) -> None:
    # Format detection reads the first row with Python's json; mutated first rows are covered by
    # test_first_row_mutations_with_detection below.
    fmt = case.fmt if fmt_explicit or not case.good_lines else None
    path, result = run_case(compress(case.data, compression), fmt=fmt, chunk_bytes=chunk_bytes, keep_older=keep_older)
    if isinstance(result, Failure):
        check_replay_error(case, path, result)
    else:
        assert not case.must_fail, f"{case.kind} replayed without error"
        assert result.startswith(b"trace_id,instance_id,timestamp_ns,")


@settings(max_examples=150, deadline=None, database=None)
@given(case=mutated_traces(first_row_clean=True), chunk_bytes=st.sampled_from([None, 7, 64]))
def test_replay_with_detection_names_the_row(case: Case, chunk_bytes: int | None) -> None:
    path, result = run_case(case.data, fmt=None, chunk_bytes=chunk_bytes, keep_older=True)
    if isinstance(result, Failure):
        check_replay_error(case, path, result)
    else:
        assert not case.must_fail, f"{case.kind} replayed without error"


@settings(max_examples=300, deadline=None, database=None)
@given(
    fmt=st.sampled_from([*FORMATS, None]),
    lines=st.lists(st.binary(max_size=30), min_size=1, max_size=5),
    chunk_bytes=st.sampled_from([None, 5, 64]),
)
def test_replay_of_random_bytes_raises_replay_error(
    fmt: str | None, lines: list[bytes], chunk_bytes: int | None
) -> None:
    lines = [line.replace(b"\n", b"") for line in lines]
    path, result = run_case(b"\n".join(lines), fmt=fmt, chunk_bytes=chunk_bytes, keep_older=False)
    assert isinstance(result, Failure)
    if result.line is not None:
        assert 1 <= result.line <= len(lines)
        assert f"{path}:{result.line}" in str(result)


@pytest.mark.parametrize("data", [b"\x28\xb5\x2f\xfd", b"\x1f\x8b\x08\x00garbage"])  # zstd, gzip
@pytest.mark.parametrize("fmt", [None, "mooncake"])
def test_a_corrupt_compressed_trace_names_the_file_not_a_line(data: bytes, fmt: str | None) -> None:
    """Found by the random-bytes test: with format detection an unreadable compressed file
    failed with line 0; the whole file is at fault, so no line is named (a given format reads
    the first line and names it)."""
    path, result = run_case(data, fmt=fmt, chunk_bytes=None, keep_older=False)
    assert isinstance(result, Failure)
    where = path if fmt is None else f"{path}:1"
    assert f"{where}: cannot read (corrupt or truncated compressed data?)" in str(result)
    assert result.line == (None if fmt is None else 1)


# ---- mutated first rows with format detection (deterministic) ------------------------------------


def first_row_mutations(fmt: str) -> list[tuple[str, bytes]]:
    row = base_row(fmt, 1)
    text = dumps(row)
    out: list[tuple[str, bytes]] = []
    for field, values in BAD_VALUES[fmt].items():
        out += [(f"{field}={v!r}", dumps({**row, field: v})) for v in values]
    out += [(f"drop {field}", dumps({k: v for k, v in row.items() if k != field})) for field in REQUIRED[fmt]]
    out += [(f"truncate {i}", text[:i]) for i in range(1, len(text), 7)]
    out += [(f"poison {p!r} at {i}", text[:i] + p + text[i:]) for p in POISON_BYTES for i in (0, 1, 5, len(text))]
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_first_row_mutations_with_detection(fmt: str) -> None:
    rest = b"".join(b"\n" + dumps(base_row(fmt, n)) for n in range(2, 5))
    failures = []
    for label, first in first_row_mutations(fmt):
        path, result = run_case(first + rest, fmt=None, chunk_bytes=None, keep_older=True)
        if not isinstance(result, Failure) or result.line != 1 or f"{path}:1" not in str(result):
            failures.append((label, result))
    assert failures == []


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("junk", ["deep", "digits"])
def test_first_row_junk_that_python_json_cannot_parse(fmt: str, junk: str) -> None:
    row = dumps(base_row(fmt, 1))
    value = b"[" * 10000 if junk == "deep" else b"9" * 5000
    first = row[:-1] + b',"x":' + value + b"}"
    path, result = run_case(first + b"\n" + row, fmt=None, chunk_bytes=None, keep_older=True)
    # format detection parses the first row with Python's json: 10,000 brackets exceed its nesting
    # limit and 5,000 digits its integer-size limit, so both fail on line 1 with a clear reason
    assert isinstance(result, Failure)
    assert f"{path}:1" in str(result)
