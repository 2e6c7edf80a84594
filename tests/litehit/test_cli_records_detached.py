"""The `litehit` command prints its answer and exits before its run is recorded: a forked child
writes the rows (so SQLAlchemy's import and the migration check never delay the answer), and
`litehit jobs` waits for recordings of runs that already ended. Real processes: the console
script, with the database held locked by this test while the command answers."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

LITEHIT = str(Path(sys.executable).with_name("litehit"))


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("facts")
    env = {**os.environ, "LITEHIT_RECORD_JOBS": "0"}
    subprocess.run(
        [LITEHIT, "replay", str(data_dir / "synthetic_trace.jsonl"), "-o", str(out)],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    return out / "litehit_facts.csv"


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "LITEHIT_HOME": str(home)}


def _run(args: list[str], home: Path, tmp_path: Path) -> tuple[int, str, str]:
    """Runs the console script; stderr goes to a file, as on a terminal: a recording child keeps
    stderr (its warning goes there), so a pipe on stderr would only end when the child ends."""
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        r = subprocess.run(
            [LITEHIT, *args], stdout=subprocess.PIPE, stderr=stderr, text=True, env=_env(home), timeout=60
        )
    return r.returncode, r.stdout, err.read_text()


def _jobs(home: Path) -> list[list[str]]:
    r = subprocess.run([LITEHIT, "jobs"], capture_output=True, text=True, env=_env(home), timeout=60, check=True)
    return [line.split() for line in r.stdout.splitlines()[1:]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    subprocess.run([LITEHIT, "migrate"], capture_output=True, env=_env(home), timeout=60, check=True)
    return home


def test_the_answer_comes_before_the_record_and_jobs_waits_for_it(home: Path, tmp_path: Path, facts: Path) -> None:
    held = sqlite3.connect(home / "litehit.db", isolation_level=None, timeout=0)
    held.execute("BEGIN EXCLUSIVE")  # no one can write a job row until this test lets go
    try:
        code, out, err = _run(["query", str(facts), "--capacity", "1", "-1"], home, tmp_path)
        assert code == 0 and "warning" not in err, err
        assert out.splitlines()[-1].split()[:2] == ["total", "3,993"]  # the table was printed ...
        assert held.execute("SELECT count(*) FROM jobs").fetchone() == (0,)  # ... before any row exists
        code, _, err = _run(["query", str(tmp_path / "absent.csv"), "--capacity", "1"], home, tmp_path)
        assert code == 1 and "absent.csv" in err
    finally:
        held.rollback()
        held.close()
    rows = _jobs(home)  # waits for both children's commits, whatever order they finish in
    assert sorted(row[3] for row in rows if row[1] == "query") == ["failed", "succeeded"]


def test_a_recording_child_that_cannot_record_warns_on_stderr(tmp_path: Path, facts: Path) -> None:
    env = {**_env(tmp_path / "home"), "LITEHIT_DATABASE_URL": f"sqlite:///{tmp_path}"}  # a directory
    r = subprocess.run(
        [LITEHIT, "query", str(facts), "--capacity", "1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0 and "3,993" in r.stdout
    assert "warning: not recording this run" in r.stderr  # the pipe stayed open until the child wrote it


def test_the_query_command_imports_no_database_or_settings_layer(tmp_path: Path, facts: Path) -> None:
    """In-process, run as the console script runs it (no argv: it records in a child): after the command, the
    process that printed the answer has imported none of SQLAlchemy, Alembic, pydantic or
    pydantic-settings (the recording child reads the settings and builds the spec)."""
    code = (
        "import sys\n"
        "from litehit.cli import main\n"
        f"sys.argv = ['litehit', 'query', {str(facts)!r}, '--capacity', '1', '-1']\n"
        "rc = main()\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic', 'pydantic'))), rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path / "home"), timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "LOADED [] 0"


def test_switched_off_the_child_records_nothing(tmp_path: Path, facts: Path) -> None:
    from litehit.jobs.records import wait_for_records

    home = tmp_path / "home"
    env = {**_env(home), "LITEHIT_RECORD_JOBS": "0"}
    r = subprocess.run([LITEHIT, "query", str(facts), "--capacity", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    wait_for_records()
    assert not (home / "litehit.db").exists()


def test_settings_that_fail_only_in_the_child_still_warn(tmp_path: Path, facts: Path) -> None:
    """The query command answers without reading the settings; its recording child reads them and
    warns when they are invalid (nothing is recorded, the answer stands)."""
    env = {**_env(tmp_path / "home"), "LITEHIT_DB_POOL_SIZE": "many"}
    r = subprocess.run([LITEHIT, "query", str(facts), "--capacity", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "3,993" in r.stdout
    assert "warning: not recording this run in the database" in r.stderr and "db_pool_size" in r.stderr


def test_a_closed_pipe_after_the_answer_records_the_run_as_succeeded(home: Path, tmp_path: Path, facts: Path) -> None:
    """`litehit query F -o out | head -0`-style: the reader goes away, the result was complete."""
    proc = subprocess.Popen(
        [LITEHIT, "query", str(facts), "--capacity", *["1"] * 2000, "-o", str(tmp_path / "q.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(home),
    )
    assert proc.stdout is not None
    proc.stdout.close()  # before the table (2,000 columns: far beyond a pipe buffer) is written
    assert proc.wait(timeout=60) == 0
    rows = _jobs(home)
    assert [row[3] for row in rows if row[1] == "query"] == ["succeeded"]
