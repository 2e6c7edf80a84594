"""The compose stack's ``migrate`` service (``alembic upgrade head``) says what it does: every
revision it runs is logged, and a second run on a migrated database logs none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from service_fixtures import ROOT

from litehit.db.migrate import SCHEMA_HEAD, current_revision


def alembic_upgrade(url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    env["LITEHIT_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_alembic_upgrade_logs_each_revision_it_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'litehit.db'}"
    first = alembic_upgrade(url)
    assert first.returncode == 0, first.stderr
    ran = [line.split(", ")[0] for line in first.stderr.splitlines() if "Running upgrade" in line]
    revisions = [f"{n:04d}" for n in range(1, int(SCHEMA_HEAD) + 1)]
    assert ran == [
        f"INFO  [alembic.runtime.migration] Running upgrade {old} -> {new}"
        for old, new in zip(["", *revisions[:-1]], revisions, strict=True)
    ]
    assert current_revision(url) == SCHEMA_HEAD
    again = alembic_upgrade(url)
    assert again.returncode == 0, again.stderr
    assert "Running upgrade" not in again.stderr and "Will assume" in again.stderr
