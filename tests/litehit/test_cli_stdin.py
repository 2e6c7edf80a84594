"""``-`` reads standard input wherever a command reads a trace, a config or facts: the same bytes
as from the file, messages naming ``-``, nothing left behind."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

LITEHIT = [str(Path(sys.executable).with_name("litehit"))]


def run(args: list[str], stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*LITEHIT, *args], input=stdin, capture_output=True, cwd=cwd, timeout=300, check=False)


def _spools() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("litehit-stdin-*")}


def test_a_trace_and_facts_from_stdin_equal_the_files(data_dir: Path, tmp_path: Path) -> None:
    trace = data_dir / "conversation_trace.jsonl"
    head = b"".join(trace.read_bytes().splitlines(keepends=True)[:400])
    (tmp_path / "trace.jsonl").write_bytes(head)
    before = _spools()
    piped = run(["replay", "-", "--ttl-seconds", "0,60", "-o", "piped"], head, tmp_path)
    assert piped.returncode == 0, piped.stderr
    direct = run(["replay", "trace.jsonl", "--ttl-seconds", "0,60", "-o", "direct"], b"", tmp_path)
    assert direct.returncode == 0, direct.stderr
    facts = (tmp_path / "direct" / "litehit_facts.csv").read_bytes()
    assert (tmp_path / "piped" / "litehit_facts.csv").read_bytes() == facts
    query = run(["query", "-", "--capacity", "1GiB", "-1", "-o", "q.jsonl"], facts, tmp_path)
    assert query.returncode == 0, query.stderr
    again = run(["query", "direct/litehit_facts.csv", "--capacity", "1GiB", "-1", "-o", "r.jsonl"], b"", tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "q.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()
    profile = run(["profile", "-", "-o", "p.json"], head, tmp_path)
    assert profile.returncode == 0, profile.stderr
    assert json.loads((tmp_path / "p.json").read_text())["lanes"][0]["overall"]["requests"] == 400
    assert _spools() == before  # the spooled copies are gone


def test_errors_from_stdin_name_it(tmp_path: Path) -> None:
    rows = b'{"timestamp": 5, "input_length": 10, "hash_ids": [1]}\n{"timestamp": 1, "input_length": 10, "hash_ids": [1]}\n'
    bad = run(["replay", "-", "-o", "out"], rows, tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.decode().strip() == "litehit: error: trace is not sorted by timestamp_ns at trace_id[2] (-:2)"
    assert not (tmp_path / "out" / "litehit_facts.csv").exists()
    facts = run(["curve", "-"], b"not,a,facts,file\n", tmp_path)
    assert facts.returncode == 1
    assert facts.stderr.decode().startswith("litehit: error: -: ")


def test_a_run_record_names_stdin_not_the_spooled_copy(data_dir: Path, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "LITEHIT_HOME": str(tmp_path / "home")}
    head = b"".join((data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:100])

    def litehit(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*LITEHIT, *args], input=stdin, capture_output=True, cwd=tmp_path, env=env, timeout=300, check=False
        )

    replay = litehit(["replay", "-", "-o", "out"], head)
    assert replay.returncode == 0, replay.stderr
    facts = (tmp_path / "out" / "litehit_facts.csv").read_bytes()
    assert litehit(["query", "-", "--capacity", "1"], facts).returncode == 0
    assert litehit(["replay", "-", "--format", "mooncake", "-o", "bad"], b'{"timestamp": 1}\n').returncode == 1
    listed = litehit(["jobs"], b"").stdout.decode().splitlines()[1:]
    failed, query, replayed = (line.split()[0] for line in listed)
    shown = {job: json.loads(litehit(["jobs", "--show", job], b"").stdout) for job in (failed, query, replayed)}
    assert shown[replayed]["spec"]["trace_file_path"] == "-"
    assert shown[query]["spec"]["facts_path"] == "-"
    assert shown[failed]["spec"]["trace_file_path"] == "-"
    assert shown[failed]["error"].startswith("failed to load/replay trace: -:1: ")
    assert "litehit-stdin-" not in json.dumps(shown) and "litehit-stdin-" not in "\n".join(listed)
