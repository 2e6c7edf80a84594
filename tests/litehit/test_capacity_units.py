"""Capacities with units (512MiB, 1.5TiB, 20000blocks, 1Mtokens; plain numbers stay GiB): the
parser's exact values, the query at block and token capacities against a naive projection of the
facts rows written here, and the original output unchanged for plain numbers."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from helpers import FACTS_HEADER

from litehit.capacity import GIB, parse_capacities
from litehit.cli import main
from litehit.errors import QueryError
from litehit.query import query_facts


@pytest.mark.parametrize(
    ("text", "unit", "count", "gb"),
    [
        ("512MiB", "bytes", 512 << 20, 0.5),
        ("1.5TiB", "bytes", 3 << 39, 1536.0),
        ("2 GiB", "bytes", 2 << 30, 2.0),
        ("0.3MiB", "bytes", 314572, 314572 / GIB),  # floor(0.3 x 2^20) bytes
        ("1024B", "bytes", 1024, 1024 / GIB),
        ("4kib", "bytes", 4096, 4096 / GIB),
        ("20000blocks", "blocks", 20000, None),
        ("20Kblocks", "blocks", 20000, None),
        ("1Mtokens", "tokens", 1_000_000, None),
        ("1.5Mtokens", "tokens", 1_500_000, None),
        ("0blocks", "blocks", 0, None),
        ("1e999GiB", "bytes", 2**64 - 1, (2**64 - 1) / GIB),  # saturates like the GiB rule
    ],
)
def test_units_parse_exactly(text: str, unit: str, count: int, gb: float | None) -> None:
    (slot,) = parse_capacities([text])
    assert (slot.unit, slot.count, slot.capacity_gb) == (unit, count, gb)
    assert not slot.infinite
    assert parse_capacities([str(slot.recorded_gb)]) == [slot]  # what a job records reads back the same


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1GB", "capacities are binary, write GiB"),
        ("1.5blocks", "a whole number of blocks"),
        ("7parsecs", "unknown unit 'parsecs'"),
        ("-1GiB", "invalid capacity_gb: -1GiB"),
        ("GiB", "invalid capacity_gb: GiB"),
    ],
)
def test_bad_units_are_rejected(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse_capacities([text])


def test_plain_numbers_keep_the_original_meaning() -> None:
    slots = parse_capacities(["1", "-1", "inf", "0.5", "1e3"])
    assert [s.unit for s in slots] == ["GiB"] * 5
    assert [s.infinite for s in slots] == [False, True, True, False, False]
    assert [s.recorded_gb for s in slots] == [1.0, -1.0, -1.0, 0.5, 1000.0]


def _thresholds(curve: list[list[int]]) -> list[int]:
    return [start + j for start, run in curve for j in range(run)]


def _random_facts(rng: random.Random) -> tuple[str, list[tuple[str, int, int, int, list[int]]]]:
    """Facts rows of two instances with different block sizes and bytes, and their thresholds."""
    rows = []
    lines = [FACTS_HEADER]
    for i in range(60):
        inst, bs, bb = rng.choice([("a", 4, 4096), ("b", 16, 65536)])
        blocks = rng.randint(0, 8)
        thresholds: list[int] = []
        t = 0
        for _ in range(rng.randint(0, blocks)):
            t += rng.randint(1, 5)
            thresholds.append(t)
        curve: list[list[int]] = []
        for th in thresholds:  # arithmetic runs
            if curve and curve[-1][0] + curve[-1][1] == th:
                curve[-1][1] += 1
            else:
                curve.append([th, 1])
        length = blocks * bs + rng.randint(0, bs - 1)
        lines.append(f'r{i},{inst},{i},{length},{bs},{bb},"{json.dumps(curve, separators=(",", ":"))}"')
        rows.append((inst, bs, bb, length, _thresholds(curve)))
    return "\n".join(lines) + "\n", rows


def test_block_and_token_capacities_against_a_naive_projection(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(5):
        text, rows = _random_facts(rng)
        facts = tmp_path / f"facts{trial}.csv"
        facts.write_text(text)
        caps = ["0blocks", "3blocks", "11blocks", "8tokens", "50tokens", "1Ktokens", "16KiB", "0.001", "-1"]
        result = query_facts(facts, parse_capacities(caps))
        for summary in result.instances:
            name = summary.instance_id.decode()
            mine = [r for r in rows if r[0] == name]
            want = []
            for cap in caps:
                total = 0
                for _, bs, bb, _, th in mine:
                    if cap.endswith("blocks"):
                        limit = int(cap.removesuffix("blocks"))
                    elif cap.endswith("tokens"):
                        limit = int(cap.removesuffix("tokens").replace("K", "000")) // bs
                    elif cap.endswith("KiB"):
                        limit = 16 * 1024 // bb
                    elif cap == "-1":
                        limit = 10**9
                    else:
                        limit = int(float(cap) * GIB) // bb
                    total += sum(1 for t in th if t <= limit)
                want.append(total)
            assert summary.total_hit_blocks == want, (trial, name)


WORKED = f"""{FACTS_HEADER}
r1,i1,1000,13,4,16384,"[]"
r2,i1,2000,12,4,16384,"[[1,2]]"
r3,i1,3000,13,4,16384,"[[1,2],[4,1]]"
"""


def test_summary_lines_name_unit_capacities(tmp_path: Path) -> None:
    facts = tmp_path / "facts.csv"
    facts.write_text(WORKED)
    out = io.BytesIO()
    query_facts(facts, parse_capacities(["2blocks", "32KiB", "16tokens", "-1"]), out)
    *rows, inst, total = out.getvalue().decode().splitlines()
    assert json.loads(rows[2])["hit_blocks"] == [2, 2, 3, 3]  # 16 tokens = 4 blocks of 4
    assert inst == (
        '{"summary":true,"instance_id":"i1","requests":3,"total_input_tokens":38,"capacity_gb":[null,3.05176e-05,null,-1],'
        '"total_hit_blocks":[4,4,5,5],"total_hit_tokens":[16,16,20,20],"hit_rates":[0.421053,0.421053,0.526316,0.526316],'
        '"capacities":["2blocks","32768B","16tokens","-1.0"]}'
    )
    assert json.loads(total)["capacities"] == ["2blocks", "32768B", "16tokens", "-1.0"]
    plain = io.BytesIO()
    query_facts(facts, parse_capacities(["-1"]), plain)
    assert b'"capacities"' not in plain.getvalue()  # the original's lines, unchanged


def test_the_cli_takes_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.csv"
    facts.write_text(WORKED)
    assert main(["query", str(facts), "--capacity-gb", "2blocks", "32KiB", "-1"]) == 0
    out = capsys.readouterr().out
    assert "2 blocks" in out and "32 KiB" in out and "inf" in out
    assert main(["misses", str(facts), "--capacity-gb", "2blocks", "--format", "json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["capacity_gb"], row["capacity"], row["hit"]) == (None, "2 blocks", 16)
    assert main(["query", str(facts), "--capacity-gb", "1GB"]) == 1
    assert "capacities are binary, write GiB" in capsys.readouterr().err


def test_sweeps_and_window_sizings_take_byte_units(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from litehit.policies.options import parse_sweep_options
    from litehit.window.options import parse_window_options

    assert parse_sweep_options({"capacity_gb": ["512MiB", "1", 2, "1.5TiB"]}).capacity_gb == [0.5, 1.0, 2.0, 1536.0]
    assert parse_window_options({"capacity_gb": "256MiB"}).capacity_gb == 0.25
    assert parse_sweep_options({"capacity_gb": ["20000blocks"]}).capacity_gb == ["20000blocks"]  # per lane
    for bad, why in (("0blocks", "> 0"), ("1GB", "write GiB"), ("0MiB", "> 0")):
        with pytest.raises(Exception, match=why):
            parse_sweep_options({"capacity_gb": [bad]})
    trace = data_dir / "conversation_trace.jsonl"
    outputs = []
    for cap in ("512MiB", "0.5"):
        out = tmp_path / f"p{len(outputs)}.json"
        assert main(["policies", str(trace), "--capacity-gb", cap, "--policies", "lru,fifo", "-o", str(out)]) == 0
        outputs.append(out.read_bytes())
    capsys.readouterr()
    assert outputs[0] == outputs[1]
