"""The command line starts in a blink: `litehit COMMAND` imports only that command's module, the
list of commands (litehit.cli.commands) is what the modules declare, and `--version`, `--help`
and building any one command's parser load no engine, numpy, pydantic or SQLAlchemy."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litehit.cli import build_parser, full_parser
from litehit.cli.commands import COMMANDS

LITEHIT = str(Path(sys.executable).with_name("litehit"))
HEAVY = ("numpy", "core_c._core", "sqlalchemy", "matplotlib", "pydantic_settings")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_table_lists_exactly_what_the_modules_declare_with_the_same_help() -> None:
    full = full_parser()
    declared = _subparsers(full)
    assert list(declared) == list(COMMANDS)
    action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    assert helps == {name: text for name, (_, text) in COMMANDS.items()}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_declares_itself_alone_with_every_flag(command: str) -> None:
    alone = _subparsers(build_parser([command, "--help-not-parsed"]))[command]
    full = _subparsers(full_parser())[command]
    assert [a.option_strings for a in alone._actions] == [a.option_strings for a in full._actions]


def _imported(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nimport json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["query", "f"], ["replay", "t"], ["tiers", "f"]])
def test_declaring_the_command_line_loads_nothing_heavy(argv: list[str]) -> None:
    modules = _imported(f"from litehit.cli import build_parser\nbuild_parser({argv!r})")
    assert [m for m in modules if m.startswith(HEAVY)] == []


def test_version_and_help_answer() -> None:
    for flag in ("--version", "--help"):
        r = subprocess.run([LITEHIT, flag], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    r = subprocess.run([LITEHIT, "--help"], capture_output=True, text=True)
    for name, (_, text) in COMMANDS.items():
        assert name in r.stdout and text.split()[0] in r.stdout
    r = subprocess.run([LITEHIT, "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice: 'nope'" in r.stderr and "'tiers'" in r.stderr


def _tiny_trace(tmp_path: Path) -> Path:
    """A one-row Mooncake trace."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}) + "\n")
    return trace


def _in_child(tmp_path: Path, env: dict[str, str], argv: list[str], report: str, *, in_process: bool = False) -> Any:
    """Runs `litehit argv` in a fresh interpreter, as the `litehit` process runs it (main() without
    argv) or in process (main(argv)), which must succeed; returns the JSON of the expression
    `report` evaluated there afterwards (`seen` holds OPENBLAS_NUM_THREADS as numpy found it)."""
    call = f"main({argv!r})" if in_process else "main()"
    code = (
        "import gc, json, os, sys\n"
        "seen = {}\n"
        "class Watch:  # notes the environment numpy (and with it OpenBLAS) starts in\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy':\n"
        "            seen.setdefault('threads', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "sys.meta_path.insert(0, Watch())\n"
        f"sys.argv = ['litehit', *{argv!r}]\n"
        "from litehit.cli import main\n"
        f"assert {call} == 0\n"
        f"print(json.dumps({report}))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    return json.loads(r.stdout.splitlines()[-1])


def _clean_env(tmp_path: Path, *drop: str) -> dict[str, str]:
    """This process's environment without LITEHIT_* (and the prefixes in drop), a private home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITEHIT_", *drop))}
    env["LITEHIT_HOME"] = str(tmp_path / "home")
    return env


def _replay_modules(tmp_path: Path, env: dict[str, str]) -> list[str]:
    """The modules of a `litehit replay` that records its run, as the `litehit` process itself
    runs it (main() without argv)."""
    argv = ["replay", str(_tiny_trace(tmp_path)), "-o", str(tmp_path / "out")]
    modules: list[str] = _in_child(tmp_path, env, argv, "sorted(sys.modules)")
    return modules


def test_a_recording_replay_reads_its_settings_without_pydantic_settings(tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    modules = _replay_modules(tmp_path, env)
    assert "litehit.settings" in modules and "sqlalchemy" not in modules  # (the child records)
    assert [m for m in modules if m.startswith(("pydantic_settings", "asyncio", "matplotlib"))] == []
    (tmp_path / ".env").write_text("LITEHIT_RECORD_JOBS=0\n")  # a .env file is read the same way
    modules = _replay_modules(tmp_path, env)
    assert "dotenv" in modules and not [m for m in modules if m.startswith("pydantic_settings")]


TRACE_COMMANDS = {  # a trace command, its flags, and the plot flag that draws (None: it has none)
    "replay": (["-o", "out"], None),
    "profile": (["-o", "profile.json"], ["--plots", "plots"]),
    "window": (["--capacity-gb", "1"], None),
    "policies": (["--capacity-gb", "1"], None),
    "routes": (["--replicas", "2"], None),
}


def _modules_of(tmp_path: Path, argv: list[str]) -> list[str]:
    """The top-level modules loaded by a `litehit` run of argv (recording off), which must succeed."""
    env = {**_clean_env(tmp_path), "LITEHIT_RECORD_JOBS": "0"}
    return list(_in_child(tmp_path, env, argv, "sorted({m.split('.')[0] for m in sys.modules})"))


@pytest.mark.parametrize("command", list(TRACE_COMMANDS))
def test_a_trace_command_imports_matplotlib_only_to_draw(command: str, tmp_path: Path) -> None:
    trace = _tiny_trace(tmp_path)
    flags, draw = TRACE_COMMANDS[command]
    modules = _modules_of(tmp_path, [command, str(trace), *flags])
    assert "numpy" in modules and "matplotlib" not in modules and "sqlalchemy" not in modules
    if draw is not None:  # the same command asked to draw does load it, and draws
        assert "matplotlib" in _modules_of(tmp_path, [command, str(trace), *flags, *draw])
        assert any((tmp_path / draw[1]).glob("*.png"))


def _process_state(tmp_path: Path, env: dict[str, str], in_process: bool) -> dict[str, Any]:
    """OPENBLAS_NUM_THREADS as numpy found it when it loaded, and the count of objects gc froze,
    after a `litehit replay` (main() without argv, or main(argv) in process)."""
    argv = ["replay", str(_tiny_trace(tmp_path)), "-o", str(tmp_path / "out")]
    report = "{'threads': seen.get('threads', 'numpy not loaded'), 'frozen': gc.get_freeze_count()}"
    state: dict[str, Any] = _in_child(tmp_path, env, argv, report, in_process=in_process)
    return state


def test_the_litehit_process_runs_one_blas_thread_and_exits_without_a_collection(tmp_path: Path) -> None:
    env = {**_clean_env(tmp_path, "OPENBLAS_"), "LITEHIT_RECORD_JOBS": "0"}
    mine = _process_state(tmp_path, env, in_process=False)
    assert mine["threads"] == "1" and mine["frozen"] > 0
    # a caller of main(argv) keeps its environment and its collector
    assert _process_state(tmp_path, env, in_process=True) == {"threads": None, "frozen": 0}
    # a user's own setting stands
    assert _process_state(tmp_path, {**env, "OPENBLAS_NUM_THREADS": "4"}, in_process=False)["threads"] == "4"
