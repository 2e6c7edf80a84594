"""The facts query: the original's worked examples byte for byte, its row parsing rules and
messages, and the Mooncake facts against values derived independently here."""

from __future__ import annotations

import io
import json
import random
import struct
from pathlib import Path

import pytest
from helpers import FACTS_HEADER, config, group, instance, request, write_rows

from core_c.query import format_g
from litehit.errors import FactsError, QueryError
from litehit.jobs.replay import run_replay
from litehit.query import parse_capacities, query_facts
from litehit.spec import parse_replay_spec

WORKED = f"""{FACTS_HEADER}
r1,i1,1000,13,4,16384,"[]"
r2,i1,2000,12,4,16384,"[[1,2]]"
r3,i1,3000,13,4,16384,"[[1,2],[4,1]]"
"""


def run_query(tmp_path: Path, facts_text: str, caps: list[str]) -> list[str]:
    facts = tmp_path / "facts.csv"
    facts.write_text(facts_text)
    out = io.BytesIO()
    query_facts(facts, parse_capacities(caps), out)
    return out.getvalue().decode().splitlines()


def test_worked_query_example_byte_for_byte(tmp_path: Path) -> None:
    lines = run_query(tmp_path, WORKED, [repr(2 * 16384 / 1024**3), "-1"])
    assert lines == [
        '{"trace_id":"r1","instance_id":"i1","timestamp_ns":1000,"input_token_len":13,"hit_blocks":[0,0],"hit_rates":[0,0]}',
        '{"trace_id":"r2","instance_id":"i1","timestamp_ns":2000,"input_token_len":12,"hit_blocks":[2,2],"hit_rates":[0.666667,0.666667]}',
        '{"trace_id":"r3","instance_id":"i1","timestamp_ns":3000,"input_token_len":13,"hit_blocks":[2,3],"hit_rates":[0.615385,0.923077]}',
        '{"summary":true,"instance_id":"i1","requests":3,"total_input_tokens":38,"capacity_gb":[3.05176e-05,-1],"total_hit_blocks":[4,5],"total_hit_tokens":[16,20],"hit_rates":[0.421053,0.526316]}',
        '{"summary":true,"requests":3,"total_input_tokens":38,"capacity_gb":[3.05176e-05,-1],"total_hit_blocks":[4,5],"total_hit_tokens":[16,20],"hit_rates":[0.421053,0.526316]}',
    ]


def test_seed_worked_example_table(tmp_path: Path) -> None:
    """Seed §10: block_size 4, block_bytes 1024; 2048 B, 3072 B and infinite."""
    facts = (
        f"{FACTS_HEADER}\n"
        + "\n".join(
            f'r{i},i,{i},{n},4,1024,"{c}"'
            for i, (n, c) in enumerate(
                [(13, "[]"), (12, "[[1,2]]"), (13, "[[1,2],[4,1]]"), (8, "[[1,1]]"), (8, "[[1,2]]")], 1
            )
        )
        + "\n"
    )
    caps = [repr(2048 / 1024**3), repr(3072 / 1024**3), "-1"]
    lines = [json.loads(x) for x in run_query(tmp_path, facts, caps)]
    assert [r["hit_blocks"] for r in lines[:5]] == [[0, 0, 0], [2, 2, 2], [2, 2, 3], [1, 1, 1], [2, 2, 2]]
    total = lines[-1]
    assert total["total_hit_blocks"] == [7, 7, 8] and total["total_hit_tokens"] == [28, 28, 32]
    assert total["total_input_tokens"] == 54
    assert total["hit_rates"] == [0.518519, 0.518519, 0.592593]


def test_ttl_example_query(tmp_path: Path) -> None:
    rows = [
        request("r1", 10**9, [1, 2, 3], 13),
        request("r2", 3 * 10**9, [1, 2, 9], 12),
        request("r3", 4 * 10**9, [1, 2, 3], 13),
    ]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, tmp_path, groups=[group(ttl_seconds=3)])))
    out = io.BytesIO()
    query_facts(tmp_path / "litehit_facts.csv", parse_capacities([repr(16384 / 1024**3), "-1"]), out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[2]["hit_blocks"] == [1, 2]
    assert lines[-1]["total_hit_blocks"] == [2, 4] and lines[-1]["total_input_tokens"] == 38


def test_fanout_query_groups_by_instance(tmp_path: Path) -> None:
    rows = [request("r1", 1000, [1, 2, 3], 13), request("r2", 2000, [1, 2, 3], 13)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    spec = config(trace, tmp_path, instances=[instance("bs4", 4), instance("bs8", 8)], fanout_all_instances=True)
    run_replay(parse_replay_spec(spec))
    out = io.BytesIO()
    query_facts(tmp_path / "litehit_facts.csv", parse_capacities(["-1"]), out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) == 7
    assert [(x.get("instance_id"), x.get("summary")) for x in lines[4:]] == [("bs4", True), ("bs8", True), (None, True)]
    assert lines[6]["requests"] == 4


def test_capacity_list_is_kept_as_given(tmp_path: Path) -> None:
    lines = run_query(tmp_path, WORKED, ["0", "-1", "0", "1e-9", "1024", "-0.5"])
    total = json.loads(lines[-1])
    assert total["capacity_gb"] == [0, -1, 0, 1e-09, 1024, -0.5]
    assert '"capacity_gb":[0,-1,0,1e-09,1024,-0.5]' in lines[-1]
    assert total["total_hit_blocks"] == [0, 5, 0, 0, 5, 5]


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "", "nan", "0x10", "1_000"])
def test_invalid_capacities(bad: str) -> None:
    with pytest.raises(QueryError, match="invalid capacity_gb"):
        parse_capacities([bad])


def test_summaries_are_sorted_bytewise_and_use_integer_sums(tmp_path: Path) -> None:
    facts = (
        f"{FACTS_HEADER}\n"
        + "\n".join(
            [
                'a,b-lane,1,10,4,4096,"[[1,2]]"',
                'b,B-lane,2,1000,4,4096,"[]"',
                'c,b-lane,3,100,4,4096,"[[1,1]]"',
                'd,\xe9lane,4,4,4,4096,"[[1,1]]"',
            ]
        )
        + "\n"
    )
    lines = [json.loads(x) for x in run_query(tmp_path, facts, ["-1"])]
    assert [x.get("instance_id") for x in lines[4:]] == ["B-lane", "b-lane", "\xe9lane", None]
    assert lines[5]["hit_rates"] == [float(format((8 + 4) / 110, "g"))]  # not the mean of 0.8 and 0.04


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("", 0, "facts file is empty"),
        ("trace_id,instance_id\n", 1, "facts file header mismatch"),
        (f"{FACTS_HEADER}\na,b,c\n", 2, "expected 7 fields, got 3"),
        (f'{FACTS_HEADER}\nt,i,1,2,3,4,"[]",x\n', 2, "expected 7 fields, got 8"),
        (f'{FACTS_HEADER}\nt,i,1,2,3,"[]"\n', 2, "expected 7 fields, got 6"),
        (f'{FACTS_HEADER}\n"t,i,1,2,3,4,"[]"\n', 2, "unexpected character after a quoted field"),
        (f'{FACTS_HEADER}\nt,i,1,2,3,4,"[[1,2]]\n', 2, "unterminated quoted field"),
        (f'{FACTS_HEADER}\nt,i,1,2,3,4,"[[1]]"\n', 2, "hit_curve segment expects ','"),
        (f'{FACTS_HEADER}\nt,i,x,2,3,4,"[]"\n', 2, "timestamp_ns is not a valid integer: x"),
        (f'{FACTS_HEADER}\nt,i,1,,3,4,"[]"\n', 2, "input_token_len is empty"),
        (f'{FACTS_HEADER}\nt,i,1,-2,3,4,"[]"\n', 2, "input_token_len is not a valid unsigned integer: -2"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,0,"[]"\n', 2, "block_bytes/block_size_tokens must be positive"),
        (f'{FACTS_HEADER}\nt,i,1,8,0,4,"[]"\n', 2, "block_bytes/block_size_tokens must be positive"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[1,2]"\n', 2, "hit_curve segment must start with '['"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,2]"\n', 2, "hit_curve must end with ']'"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,2]]x"\n', 2, "hit_curve has trailing characters"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[a,2]]"\n', 2, "hit_curve segment start is not a valid integer"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,-2]]"\n', 2, "hit_curve segment length is not a valid integer"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,2}}"\n', 2, "hit_curve segment must end with ']'"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"{{}}"\n', 2, "hit_curve must start with '['"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[0,1]]"\n', 2, "starts must be >= 1"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,0]]"\n', 2, "has length 0"),
        (f'{FACTS_HEADER}\nt,i,1,80,4,4,"[[3,2],[4,1]]"\n', 2, "leave a gap after the previous segment"),
        (f'{FACTS_HEADER}\nt,i,1,8,4,4,"[[1,3]]"\n', 2, "has 3 hit blocks but the request has only 2 complete blocks"),
        (f'{FACTS_HEADER}\nok,i,1,8,4,4,"[]"\n\nbad,i,1,8,4,4,"["\n', 4, "hit_curve"),
    ],
)
def test_malformed_facts_fail_with_the_line_and_reason(tmp_path: Path, text: str, line: int, reason: str) -> None:
    facts = tmp_path / "facts.csv"
    facts.write_text(text)
    with pytest.raises(FactsError) as info:
        query_facts(facts, parse_capacities(["1"]), io.BytesIO())
    assert info.value.line == line
    assert reason in info.value.message
    assert str(info.value).startswith(f"{facts}: " + (f"facts line {line}: " if line else ""))


def test_facts_rows_round_trip_with_quotes(tmp_path: Path) -> None:
    rows = [request('id,with"quote', 1000, [1], 4), request("plain", 2000, [1], 4)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, tmp_path)))
    out = io.BytesIO()
    query_facts(tmp_path / "litehit_facts.csv", parse_capacities(["1"]), out)
    first, second = (json.loads(x) for x in out.getvalue().splitlines()[:2])
    assert first["trace_id"] == 'id,with"quote' and first["hit_blocks"] == [0]
    assert second["hit_blocks"] == [1]


NEWLINE_IDS = ["with\nnewline", "crlf\r\ninside", '"quoted"\n\n', "a,b", "plain", "ends\n", "\n"]


@pytest.mark.parametrize("chunk_bytes", [1, 5, 64, 1 << 20])
def test_ids_with_line_breaks_round_trip_across_every_chunk_cut(tmp_path: Path, chunk_bytes: int) -> None:
    """The writer quotes a trace_id or instance_id holding CR or LF, so a row may span lines; the
    reader gives back the same ids, rows and first lines as Python's csv module (the reference),
    wherever a chunk ends (inside a quoted field too)."""
    import csv

    from litehit.facts import FactsStream

    lanes = ["lane\n1", "lane2"]
    rows = [request(tid, 1000 + i, [1, i], 8, inst=lanes[i % 2]) for i, tid in enumerate(NEWLINE_IDS * 3)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, tmp_path, instances=[instance(name) for name in lanes])))
    facts = tmp_path / "litehit_facts.csv"
    with facts.open(newline="") as f:
        reader = csv.reader(f)
        next(reader)
        expected = []
        while True:
            line = reader.line_num + 1  # where the next row starts
            row = next(reader, None)
            if row is None:
                break
            expected.append((row[0], row[1], line))
    assert [e[0] for e in expected] == [r["trace_id"] for r in rows]
    stream = FactsStream(facts, chunk_bytes=chunk_bytes)
    got = []
    for chunk, groups in stream:
        names = [stream.instances.names[g].decode() for g in groups]
        for tid, name, line in zip(chunk.trace_ids(), names, chunk.column("line"), strict=True):
            got.append((tid.decode(), name, int(line)))
    assert got == expected
    out = io.BytesIO()
    query_facts(facts, parse_capacities(["1"]), out)
    assert [json.loads(x)["trace_id"] for x in out.getvalue().splitlines()[: len(rows)]] == [
        r["trace_id"] for r in rows
    ]


def test_a_quoted_field_open_to_the_end_is_unterminated_at_its_first_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litehit.facts

    facts = tmp_path / "facts.csv"
    ok = 'ok,i,1,8,4,4,"[]"\n'
    facts.write_text(f'{FACTS_HEADER}\n{ok}"open\nid,i,1,8,4,4,"[]"\n' + ok * 3)
    with pytest.raises(FactsError) as info:  # the quote closes at the next quote: a bad row
        query_facts(facts, parse_capacities(["1"]), io.BytesIO())
    assert (info.value.line, info.value.message) == (3, "unexpected character after a quoted field")
    facts.write_text(f'{FACTS_HEADER}\n{ok}"open\n' + "x\n" * 10)
    for chunk_bytes in (4, 1 << 20):
        with pytest.raises(FactsError) as info:
            for _ in litehit.facts.FactsStream(facts, chunk_bytes=chunk_bytes):
                pass
        assert (info.value.line, info.value.message) == (3, "unterminated quoted field")
    monkeypatch.setattr(litehit.facts, "OPEN_ROW_LIMIT", 8)  # a row may not run on without end
    with pytest.raises(FactsError) as info:
        for _ in litehit.facts.FactsStream(facts, chunk_bytes=4):
            pass
    assert info.value.line == 3 and "runs on over" in info.value.message


def test_a_read_failure_inside_a_quoted_field_is_the_read_failure(tmp_path: Path) -> None:
    """A truncated compressed file that ends inside a row's quoted line break fails as the read
    it is, not as an unterminated field (the row is open: the text that would close it is lost)."""
    import gzip

    from litehit.facts import FactsStream

    # 6 MB of rows that are nearly all line breaks inside quotes: the text read before the
    # failing read (the reader decompresses 1 MiB at a time) ends inside a quoted field
    rows = "".join(f'"id {i}' + "x\n" * 1000 + f'",i,{i},8,4,4,"[]"\n' for i in range(3000))
    whole = gzip.compress((FACTS_HEADER + "\n" + rows).encode())
    facts = tmp_path / "facts.csv.gz"
    messages = set()
    for cut in range(len(whole) // 4, len(whole) - 8, len(whole) // 6):
        facts.write_bytes(whole[:cut])
        with pytest.raises(FactsError) as info:
            for _ in FactsStream(facts, chunk_bytes=512):
                pass
        messages.add(info.value.message.split(":")[0])
    assert messages == {"I/O error while reading facts file"}


def test_crlf_and_blank_lines_are_tolerated(tmp_path: Path) -> None:
    lines = run_query(
        tmp_path, WORKED.replace("\n", "\r\n").replace(FACTS_HEADER + "\r\n", FACTS_HEADER + "\n") + "\r\n", ["-1"]
    )
    assert json.loads(lines[-1])["total_hit_blocks"] == [5]


def _project(curve: list[list[int]], capacity: int | None) -> int:
    hits = 0
    for start, run in curve:
        thresholds = range(start, start + run)
        hits += sum(1 for t in thresholds if capacity is None or t <= capacity)
    return hits


def test_mooncake_facts_match_values_derived_independently(data_dir: Path, tmp_path: Path) -> None:
    """The conversation trace at 0.5 1 2 4 8 16 -1 GiB with 1 MiB blocks, recomputed here from
    the golden curves and the trace with plain Python arithmetic."""
    trace = data_dir / "conversation_trace.jsonl"
    spec = config(trace, tmp_path, block_size=512, instances=[instance("m", 512, sizes=(1 << 20,))])
    run_replay(parse_replay_spec(spec))
    caps = ["0.5", "1", "2", "4", "8", "16", "-1"]
    out = io.BytesIO()
    query_facts(tmp_path / "litehit_facts.csv", parse_capacities(caps), out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    curves = [json.loads(c) for c in (data_dir / "conversation_b512.curves").read_text().splitlines()]
    lengths = [json.loads(row)["input_length"] for row in trace.read_text().splitlines()]
    blocks = [None if c == "-1" else int(float(c) * 1024) for c in caps]  # GiB of 1 MiB blocks
    want_hits = [[_project(c, b) for b in blocks] for c in curves]
    assert [r["hit_blocks"] for r in lines[:-2]] == want_hits
    total = lines[-1]
    sums = [sum(h[i] for h in want_hits) for i in range(len(caps))]
    assert total["total_hit_blocks"] == sums
    assert total["total_hit_tokens"] == [s * 512 for s in sums]
    assert total["total_input_tokens"] == sum(lengths)
    assert total["hit_rates"] == [float(format(s * 512 / sum(lengths), "g")) for s in sums]
    for row, hits, length in zip(lines, want_hits, lengths, strict=False):
        assert row["hit_rates"] == [float(format(h * 512 / length, "g")) for h in hits]


def test_format_g_matches_printf_semantics() -> None:
    rng = random.Random(8)
    values = [0.0, 1.0, 0.5, 1e-5, 0.0001, 0.00012345678, 123456.5, 999999.5, 1e6, 3.0517578125e-05, 2 / 3, 1 / 3]
    values += [rng.random() for _ in range(20000)]
    values += [rng.random() * 10 ** rng.randint(-12, 12) for _ in range(20000)]
    values += [struct.unpack("d", struct.pack("Q", rng.getrandbits(62)))[0] for _ in range(5000)]
    values += [a / b for a in range(0, 300) for b in range(1, 60)]
    for v in values:
        assert format_g(v) == format(v, "g"), v
