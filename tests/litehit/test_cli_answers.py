"""The answers the command line gives in the user's terms: the summary after every replay, absolute
hit-rate targets (checked against a naive search over projections), output formats and files,
closed pipes, --version, messages that name facts vs traces, progress off a terminal."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import instance
from test_analysis import random_facts as random_facts_text

import core_c
from litehit.cli import main
from litehit.cli.progress import ProgressReporter
from litehit.replay.chunks import Progress

LITEHIT = str(Path(sys.executable).with_name("litehit"))
GIB = 1 << 30


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LITEHIT, *args], capture_output=True, text=True, check=False)


def facts_rows(facts: Path) -> list[tuple[str, list[list[int]], int, int, int]]:
    """(instance, curve, block size, block bytes, input tokens) of every row, read as plain text."""
    rows = []
    for line in facts.read_text().splitlines()[1:]:
        parts = line.split(",", 6)
        rows.append((parts[1], json.loads(parts[6].split('"')[1]), int(parts[4]), int(parts[5]), int(parts[3])))
    return rows


def naive_hits(rows: list[tuple[str, list[list[int]], int, int, int]], name: str, capacity_bytes: int) -> int:
    return sum(core_c.project_bytes(c, capacity_bytes, bb) * bs for i, c, bs, bb, _ in rows if i == name)


def naive_input(rows: list[tuple[str, list[list[int]], int, int, int]], name: str) -> int:
    return sum(n for i, _, _, _, n in rows if i == name)


def naive_smallest_blocks(
    rows: list[tuple[str, list[list[int]], int, int, int]], name: str, block_bytes: int, need: Fraction, *, linear: bool
) -> int | None:
    """The smallest block capacity whose hit tokens reach need x input tokens (None when none
    does), by trying every capacity up to the largest threshold, or by bisection (hits only grow)."""
    total = naive_input(rows, name)
    top = max((s + r for i, c, _, _, _ in rows if i == name for s, r in c), default=0)

    def enough(blocks: int) -> bool:
        return naive_hits(rows, name, blocks * block_bytes) >= need * total

    if linear:
        return next((blocks for blocks in range(top + 1) if enough(blocks)), None)
    if not enough(top):
        return None
    low, high = 0, top
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return low


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("replay")
    trace = Path(__file__).resolve().parents[2] / "examples" / "data" / "conversation_trace.jsonl"
    done = run("replay", str(trace), "-o", str(out), "--target-hit-rate", "0.3,0.5")
    assert done.returncode == 0, done.stderr
    return out / "litehit_facts.csv", done


def test_replay_prints_a_hit_rate_summary_per_lane(
    replayed: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    facts, done = replayed
    lines = done.stdout.splitlines()
    start = lines.index("lane b512 (512 tokens/block, 1 MiB/block, no TTL): 12,031 requests")
    assert lines[start + 1] == "  plateau 37.34% from 144.4 GiB (147,881 blocks)"
    assert lines[start + 2].split() == ["capacity", "blocks", "hit", "rate"]
    ladder = [line.split() for line in lines[start + 3 : start + 19]]
    assert [row[:3] for row in ladder[:3]] == [["8", "MiB", "8"], ["16", "MiB", "16"], ["32", "MiB", "32"]]
    assert ladder[-1][:3] == ["256", "GiB", "262,144"]
    rows = facts_rows(facts)
    total = naive_input(rows, "b512")
    for row in ladder:
        blocks = int(row[2].replace(",", ""))
        assert row[3] == f"{naive_hits(rows, 'b512', blocks << 20) / total:.2%}"
    assert lines[start + 19 : start + 24] == [
        "  50% of the plateau (18.67%) from 7.705 GiB (7,890 blocks)",
        "  90% of the plateau (33.60%) from 28.91 GiB (29,599 blocks)",
        "  99% of the plateau (36.97%) from 77.69 GiB (79,554 blocks)",
        "  hit rate 30.00% from 19.66 GiB (20,136 blocks)",
        "  hit rate 50.00%: not reachable (plateau 37.34%)",
    ]
    plateau = naive_hits(rows, "b512", 1 << 62)
    for blocks, fraction in [(7890, Fraction(1, 2)), (29599, Fraction(9, 10)), (79554, Fraction(99, 100))]:
        assert naive_hits(rows, "b512", blocks << 20) >= fraction * plateau
        assert naive_hits(rows, "b512", (blocks - 1) << 20) < fraction * plateau
    assert naive_hits(rows, "b512", 20136 << 20) >= Fraction(3, 10) * total
    assert naive_hits(rows, "b512", 20135 << 20) < Fraction(3, 10) * total
    assert not any(line.startswith("total") for line in lines)


def test_replay_json_holds_the_summary(data_dir: Path, tmp_path: Path) -> None:
    done = run(
        "replay",
        str(data_dir / "conversation_trace.jsonl"),
        "--block-sizes",
        "512,1024",
        "--ttl-seconds",
        "0,60",
        "-o",
        str(tmp_path),
        "--json",
        "--target-hit-rate",
        "0.05",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # stdout is one JSON document, nothing else
    assert data["facts_rows"] == 48124 and "total" not in data
    lanes = {lane["instance_id"]: lane for lane in data["lanes"]}
    assert [lane["instance_id"] for lane in data["lanes"]] == ["b512", "b1024", "b512_ttl60", "b1024_ttl60"]
    assert (lanes["b1024_ttl60"]["block_size"], lanes["b1024_ttl60"]["ttl_seconds"]) == (1024, 60)
    rows = facts_rows(tmp_path / "litehit_facts.csv")
    lane = lanes["b512_ttl60"]
    assert lane["plateau"]["hit_tokens"] == naive_hits(rows, "b512_ttl60", 1 << 62)
    assert [p["capacity_bytes"] for p in lane["ladder"]] == [1 << k for k in range(20, 34)]
    for p in lane["ladder"]:
        assert p["hit_tokens"] == naive_hits(rows, "b512_ttl60", p["capacity_bytes"])
    assert [f["fraction"] for f in lane["plateau_fractions"]] == [0.5, 0.9, 0.99]
    (target,) = lane["hit_rate_targets"]
    assert target["reachable"] and target["target_hit_rate"] == 0.05
    assert target["capacity_blocks"] == naive_smallest_blocks(
        rows, "b512_ttl60", 1 << 20, Fraction(1, 20), linear=False
    )


def random_facts(path: Path, seed: int) -> Path:
    path.write_text(random_facts_text(random.Random(seed), 80, [("a", 4, 1000), ("b", 4, 1000)]))
    return path


@pytest.mark.parametrize("seed", range(3))
def test_target_hit_rate_equals_a_naive_search(tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
    facts = random_facts(tmp_path / "f.csv", seed)
    rows = facts_rows(facts)
    rates = ["0", "0.05", "0.1", "0.2", "0.3", "0.45", "1"]
    assert main(["curve", str(facts), "--target-hit-rate", ",".join(rates), "--format", "json"]) == 0
    for inst in json.loads(capsys.readouterr().out)["instances"]:
        for got, rate in zip(inst["hit_rate_targets"], rates, strict=True):
            want = naive_smallest_blocks(rows, inst["instance_id"], 1000, Fraction(rate), linear=True)
            assert got["reachable"] == (want is not None), (inst["instance_id"], rate)
            assert got.get("capacity_blocks") == want, (inst["instance_id"], rate)
    assert main(["curve", str(facts), "--target-hit-rate", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("a", "b"):
        plateau = naive_hits(rows, name, 1 << 62) / naive_input(rows, name)
        assert f"  hit rate 100.00%: not reachable (plateau {plateau:.2%})" in out


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_facts(tmp_path_factory.mktemp("facts") / "f.csv", 7)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["curve", "-o"], "x.txt"),
        (["curve", "-o"], "x"),
        (["curve", "--format", "csv", "-o"], "x.json"),
        (["curve", "--format", "table", "-o"], "x.csv"),
        (["misses", "--capacity-gb", "1", "-o"], "x.json"),
        (["misses", "--capacity-gb", "1", "--format", "csv", "-o"], "x.jsonl"),
    ],
)
def test_an_output_extension_must_match_its_format(facts: Path, tmp_path: Path, args: list[str], name: str) -> None:
    done = run(args[0], str(facts), *args[1:], str(tmp_path / name))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "litehit: error:" in done.stderr and name in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_curve_and_misses_formats_and_files(facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["curve", str(facts), "--format", "csv"]) == 0
    csv_out = capsys.readouterr().out
    assert csv_out.splitlines()[0] == "instance_id,capacity_blocks,capacity_bytes,capacity_gib,hit_tokens,hit_rate"
    assert main(["curve", str(facts), "-o", str(tmp_path / "c.csv")]) == 0
    assert (tmp_path / "c.csv").read_text() == csv_out
    assert capsys.readouterr().out.endswith(f"breakpoints written to {tmp_path / 'c.csv'}\n")
    assert main(["misses", str(facts), "--capacity-gb", "0.0001", "-1", "--format", "json"]) == 0
    json_out = capsys.readouterr().out
    assert [json.loads(line)["capacity_gb"] for line in json_out.splitlines()] == [0.0001, -1.0, 0.0001, -1.0]
    assert main(["misses", str(facts), "--capacity-gb", "0.0001", "-1", "-o", str(tmp_path / "m.jsonl")]) == 0
    assert (tmp_path / "m.jsonl").read_text() == json_out
    assert main(["misses", str(facts), "--capacity-gb", "-1", "-o", str(tmp_path / "m.csv")]) == 0
    lines = (tmp_path / "m.csv").read_text().splitlines()
    assert lines[0] == "instance_id,capacity_gb,input_tokens,hit,evicted,cold_or_expired,tail"
    for line in lines[1:]:
        _, _, total, *parts = line.split(",")
        assert sum(map(int, parts)) == int(total)
    assert main(["misses", str(facts), "--capacity-gb", "-1", "-o", str(tmp_path / "m.txt")]) == 0
    assert (tmp_path / "m.txt").read_text().startswith("instance")


@pytest.mark.parametrize(
    "args",
    [
        ["curve"],
        ["curve", "--format", "csv"],
        ["misses", "--capacity-gb", *[str(i / 1000) for i in range(1, 400)]],
        ["query", "--capacity-gb", "1", "-1"],
    ],
)
def test_a_closed_pipe_ends_quietly_with_exit_0(facts: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        done = subprocess.run(
            [LITEHIT, args[0], str(facts), *args[1:]], stdout=write_end, capture_output=False, stderr=subprocess.PIPE
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0 and done.stderr == b""


def test_head_of_a_long_output(facts: Path) -> None:
    caps = " ".join(str(i / 1000) for i in range(1, 2000))
    for command in (f"curve {facts} --format csv", f"misses {facts} --capacity-gb {caps}"):
        done = subprocess.run(
            f"set -o pipefail; {LITEHIT} {command} | head -1",
            shell=True,
            executable="/bin/bash",
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and done.stderr == "" and done.stdout.count("\n") == 1


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0 and done.stdout == "litehit 0.1.0\n"


def test_plot_without_output_writes_next_to_the_facts(facts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(facts)]) == 0
    assert (facts.parent / "plots" / "hit_rate.svg").exists()
    assert str(facts.parent / "plots" / "hit_rate.svg") in capsys.readouterr().out


def test_facts_commands_name_a_missing_file_and_a_trace(data_dir: Path, tmp_path: Path) -> None:
    trace = str(data_dir / "conversation_trace.jsonl")
    for command in (["query", "--capacity-gb", "1"], ["curve"], ["misses", "--capacity-gb", "1"], ["plot"]):
        done = run(command[0], str(tmp_path / "none.csv"), *command[1:])
        assert done.returncode == 1
        assert done.stderr == f"litehit: error: {tmp_path / 'none.csv'}: no such facts file\n"
        done = run(command[0], trace, *command[1:])
        assert done.returncode == 1
        assert done.stderr == (
            f"litehit: error: {trace}: this looks like a trace, not a facts file: run `litehit replay` first\n"
        )


def _progress(read: int, total: int, seconds: float = 1.0) -> Progress:
    return Progress(lines=read, reads=read, blocks=10 * read, bytes_read=read, bytes_total=total, elapsed_s=seconds)


def test_progress_off_a_terminal_logs_every_tenth_and_a_final_line() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(out, tty=False)
    for read in range(1, 1001):
        reporter(_progress(read, 1000))
    reporter.finish("done")
    lines = out.getvalue().splitlines()
    assert len(lines) == 11
    assert [line.split()[-3] for line in lines[:10]] == [f"{10 * k}.0%" for k in range(1, 11)]
    assert lines[-1] == "replay: done: 1,000 rows  10,000 blocks in 0:01  0.01 M blocks/s"


def test_progress_of_an_unsized_input_logs_on_time_and_a_final_line() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(out, tty=False)  # every 30 s: none in this test
    for read in range(1, 100):
        reporter(_progress(read, 0))
    assert out.getvalue() == ""
    reporter = ProgressReporter(out, tty=False, interval=0.0)
    reporter(_progress(5, 0))
    reporter.finish()
    assert out.getvalue().splitlines() == [
        "replay: 5 rows  50 blocks  0.00 M blocks/s",
        "replay: end: 5 rows  50 blocks in 0:01  0.00 M blocks/s",
    ]


def test_a_replay_off_a_terminal_ends_with_a_final_progress_line(
    replayed: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, done = replayed
    assert done.stderr.splitlines()[-1].startswith("replay: done: 12,031 rows  276,491 blocks in ")


def test_a_group_without_instances_is_warned_about(data_dir: Path, tmp_path: Path) -> None:
    cfg = {
        "trace_file_path": str(data_dir / "conversation_trace.jsonl"),
        "output_result_path": str(tmp_path),
        "block_size": 512,
        "trace_format": "mooncake",
        "instance_groups": [{"name": "g1"}, {"name": "t60", "ttl_seconds": 60}],
        "instances": [{**instance("m", 512, sizes=(1 << 20,)), "instance_group_name": "g1"}],
        "override_instance_id": "m",
    }
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    done = run("replay", str(path))
    assert done.returncode == 0, done.stderr
    assert "litehit: warning: instance group t60 has no instances: it gives no lane\n" in done.stderr
    assert "instance group g1" not in done.stderr
