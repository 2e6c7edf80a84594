"""Builds the C test programs in core_c/tests/ with AddressSanitizer + UndefinedBehaviorSanitizer
and runs them: memory errors or undefined behaviour anywhere in the engine fail the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core_c"
PROGRAMS = sorted((CORE / "tests").glob("test_*.c"))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_c_program_under_sanitizers(program: Path, tmp_path: Path) -> None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    assert cc, "a C compiler is required to build core_c"
    binary = tmp_path / program.stem
    build = subprocess.run(
        [
            cc,
            "-std=c99",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
            f"-I{CORE / 'include'}",
            *map(str, sorted((CORE / "src").glob("*.c"))),
            str(program),
            "-o",
            str(binary),
            "-lm",
            "-pthread",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    run = subprocess.run([str(binary)], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "passed" in run.stdout
