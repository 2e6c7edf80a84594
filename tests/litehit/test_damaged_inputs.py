"""Damaged inputs a user hands the CLI: one line naming the file, never a traceback, and no more
work than the bytes take. A truncated .gz or a corrupt .zst given where facts are read (report,
query, curve, misses, plot) raised EOFError/ZstdError tracebacks; a gzip of 256 MiB of newlines
kept `litehit profile` busy for over a minute in a Python line loop before "the trace has no
rows"."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard

from litehit.cli import main

LITEHIT = str(Path(sys.executable).with_name("litehit"))

FACTS_COMMANDS = {
    "report": ["report", "{f}", "-o", "{o}/r.html"],
    "query": ["query", "{f}", "--capacity", "1"],
    "curve": ["curve", "{f}"],
    "misses": ["misses", "{f}", "--capacity", "1", "-1"],
    "plot": ["plot", "{f}", "-o", "{o}/plots"],
}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("damaged")
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(out / "r")]) == 0
    facts = (out / "r" / "litehit_facts.csv").read_bytes()
    whole = gzip.compress(facts)
    (out / "truncated.csv.gz").write_bytes(whole[: len(whole) // 3])
    broken = bytearray(zstandard.ZstdCompressor().compress(facts))
    broken[len(broken) // 2 : len(broken) // 2 + 64] = b"x" * 64
    (out / "corrupt.csv.zst").write_bytes(bytes(broken))
    return {"gz": out / "truncated.csv.gz", "zst": out / "corrupt.csv.zst"}


@pytest.mark.parametrize("which", ["gz", "zst"])
@pytest.mark.parametrize("command", FACTS_COMMANDS)
def test_damaged_compressed_facts_name_the_file_in_one_line(
    damaged: dict[str, Path], tmp_path: Path, command: str, which: str
) -> None:
    argv = [a.format(f=damaged[which], o=tmp_path) for a in FACTS_COMMANDS[command]]
    run = subprocess.run([LITEHIT, *argv], capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith(f"litehit: error: {damaged[which]}")
    assert "corrupt or truncated compressed data" in lines[0]


def test_a_gzip_of_blank_lines_is_refused_at_the_cost_of_its_bytes(tmp_path: Path) -> None:
    blank = tmp_path / "newlines.jsonl.gz"
    with gzip.open(blank, "wb", compresslevel=1) as f:
        for _ in range(256):
            f.write(b"\n" * (1 << 20))
    for command in ("profile", "replay"):
        start = time.monotonic()
        run = subprocess.run(
            [
                LITEHIT,
                command,
                str(blank),
                *(["-o", str(tmp_path / "o")] * (command == "replay")),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            cwd=tmp_path,
        )
        seconds = time.monotonic() - start
        assert run.returncode == 1 and run.stderr.strip() == f"litehit: error: {blank}: the trace has no rows"
        assert seconds < 45, seconds  # a bound on the old minute-long Python loop, not a speed target


def test_the_first_row_is_found_past_a_long_blank_prefix(tmp_path: Path) -> None:
    from litehit.traces.formats import detect_format, first_row

    trace = tmp_path / "t.jsonl"
    trace.write_bytes(
        b"\xef\xbb\xbf" + b" \r\n" * 700_000 + b'  {"timestamp": 1, "input_length": 5, "hash_ids": [1]}\r\n'
    )
    with trace.open("rb") as f:
        assert first_row(f) == (700_001, b'{"timestamp": 1, "input_length": 5, "hash_ids": [1]}')
    assert detect_format(trace) == "mooncake"
    trace.write_bytes(b"\n\n\n")
    assert detect_format(trace) is None


LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b12\nsize 42\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{f}", "-o", "{o}"],
        ["replay", "{f}", "--format", "mooncake", "-o", "{o}"],
        ["profile", "{f}"],
        ["query", "{f}", "--capacity", "1"],
        ["curve", "{f}"],
    ],
    ids=lambda a: " ".join(a[:3]),
)
def test_a_git_lfs_pointer_says_what_it_is(tmp_path: Path, argv: list[str]) -> None:
    """A clone without `git lfs pull` holds pointers: before, "invalid JSON" or a header mismatch."""
    pointer = tmp_path / "trace.jsonl"
    pointer.write_bytes(LFS)
    run = subprocess.run(
        [LITEHIT, *(a.format(f=pointer, o=tmp_path / "o") for a in argv)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 1
    assert run.stderr.strip().endswith(
        "this is a Git LFS pointer, not the file's content: fetch it first (git lfs pull)"
    )
