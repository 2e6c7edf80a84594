"""The ``litehit replay`` command: golden curves through the CLI, fanout equivalence, exit codes,
and a process killed mid-replay never leaves a facts file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import read_facts

from litehit.cli import main

LITEHIT = str(Path(sys.executable).with_name("litehit"))


def curves_of(facts: Path, instance: str) -> list[str]:
    return [r["hit_curve"] for r in read_facts(facts) if r["instance_id"] == instance]


def test_cli_reproduces_the_three_golden_curve_files(data_dir: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            LITEHIT,
            "replay",
            str(data_dir / "conversation_trace.jsonl"),
            "--format",
            "mooncake",
            "--block-sizes",
            "512,1024",
            "--ttl-seconds",
            "0,60",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    facts = tmp_path / "litehit_facts.csv"
    assert f"facts: {facts} (48,124 rows)" in run.stdout
    for instance, golden in [
        ("b512", "conversation_b512"),
        ("b1024", "conversation_b1024"),
        ("b512_ttl60", "conversation_b512_ttl60"),
    ]:
        assert curves_of(facts, instance) == (data_dir / f"{golden}.curves").read_text().splitlines()


def test_format_is_detected_and_block_size_defaults_per_format(data_dir: Path, tmp_path: Path) -> None:
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(tmp_path)]) == 0
    rows = read_facts(tmp_path / "litehit_facts.csv")
    assert {(r["instance_id"], r["block_size_tokens"], r["block_bytes"]) for r in rows} == {("b512", "512", "1048576")}
    assert [r["hit_curve"] for r in rows] == (data_dir / "conversation_b512.curves").read_text().splitlines()


def test_fanout_in_one_replay_equals_separate_replays(data_dir: Path, tmp_path: Path) -> None:
    trace = str(data_dir / "conversation_trace.jsonl")
    assert main(["replay", trace, "--block-sizes", "512,1024", "-o", str(tmp_path / "both")]) == 0
    both = read_facts(tmp_path / "both" / "litehit_facts.csv")
    for size in ("512", "1024"):
        out = tmp_path / size
        assert main(["replay", trace, "--block-sizes", size, "-o", str(out)]) == 0
        assert [r for r in both if r["instance_id"] == f"b{size}"] == read_facts(out / "litehit_facts.csv")


def test_config_file_mode_and_worker_count_independence(data_dir: Path, tmp_path: Path) -> None:
    outputs = []
    for workers in (1, 4):
        out = tmp_path / f"w{workers}"
        out.mkdir()
        cfg = {
            "trace_file_path": str(data_dir / "conversation_trace.jsonl"),
            "output_result_path": str(out),
            "block_size": 512,
            "pipeline_worker_count": workers,
            "trace_format": "mooncake",
            "instance_groups": [{"name": "g"}],
            "instances": [
                {
                    "instance_group_name": "g",
                    "instance_id": "m",
                    "block_size": 512,
                    "location_spec_infos": [{"name": "a", "size": 1 << 20}],
                    "location_spec_groups": [{"name": "full", "spec_names": ["a"]}],
                    "optimizer_state_info": {"full_location_spec_group_name": "full"},
                }
            ],
        }
        path = tmp_path / f"cfg{workers}.json"
        path.write_text(json.dumps(cfg))
        assert main(["replay", str(path)]) == 0
        outputs.append((out / "litehit_facts.csv").read_bytes())
    assert outputs[0] == outputs[1]


def test_failure_exits_1_with_a_one_line_reason(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 5, "input_length": 512, "hash_ids": [1]}\n{"timestamp": 4, "input_length": 1}\n')
    run = subprocess.run(
        [LITEHIT, "replay", str(trace), "-o", str(tmp_path / "o")], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith(
        f"litehit: error: failed to load/replay trace: {trace}:2: missing array field: hash_ids"
    )
    assert not (tmp_path / "o" / "litehit_facts.csv").exists()


def test_config_errors_name_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "trace_file_path": "t",
                "output_result_path": "o",
                "block_size": "16",
                "instance_groups": [{"name": "g"}],
                "instances": [],
            }
        )
    )
    run = subprocess.run([LITEHIT, "replay", str(cfg)], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert run.stderr == "litehit: error: block_size: expected an integer (got '16')\n"
    cfg.write_text(
        json.dumps(
            {
                "trace_file_path": "t",
                "output_result_path": "o",
                "block_size": 16,
                "instance_groups": [{"name": "g"}],
                "instances": [],
            }
        )
    )
    run = subprocess.run([LITEHIT, "replay", str(cfg)], capture_output=True, text=True, check=False)
    assert run.stderr == "litehit: error: instances: lite_hit config: instances must not be empty (got [])\n"


def test_help_explains_both_forms() -> None:
    run = subprocess.run([LITEHIT, "replay", "--help"], capture_output=True, text=True, check=True)
    assert "litehit replay CONFIG.json" in run.stdout and "--block-sizes" in run.stdout


def _mooncake_rows(n: int) -> bytes:
    lines, next_id = [], 0
    for i in range(n):
        ids = list(range(max(0, next_id - 10), next_id + 10))
        next_id += 10
        lines.append(json.dumps({"timestamp": i, "input_length": 512 * len(ids) + 7, "hash_ids": ids}))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_killed_mid_replay_leaves_no_facts_and_a_rerun_publishes(tmp_path: Path) -> None:
    data = _mooncake_rows(120_000)  # ~12 MB
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    (out / "litehit_facts.csv").write_text("older facts\n")
    proc = subprocess.Popen(
        [LITEHIT, "replay", str(fifo), "--format", "mooncake", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    writer = threading.Thread(target=_feed, args=(fifo, data[: len(data) * 2 // 3]), daemon=True)
    writer.start()
    tmp = out / "litehit_facts.csv.tmp"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp.exists() and tmp.stat().st_size > 100_000):
            time.sleep(0.02)
        assert tmp.exists() and tmp.stat().st_size > 100_000, "the replay never got going"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert (out / "litehit_facts.csv").read_text() == "older facts\n"  # never a half file
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(data)
    assert main(["replay", str(trace), "--format", "mooncake", "-o", str(out)]) == 0
    rows = read_facts(out / "litehit_facts.csv")
    assert len(rows) == 120_000 and rows[-1]["hit_curve"] == "[[11,10]]"
    assert not tmp.exists()


def _feed(fifo: Path, data: bytes) -> None:
    try:
        with fifo.open("wb") as f:
            f.write(data)
            time.sleep(60)  # keep the pipe open: the reader blocks, mid-replay, until killed
    except (BrokenPipeError, OSError):
        pass
