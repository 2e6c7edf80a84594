"""The Alembic revisions build exactly the schema the models declare (no drift either way)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from litehit.db.migrate import downgrade, upgrade
from litehit.db.models import Base


def test_migrated_schema_equals_the_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'schema.db'}"
    upgrade(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


DB_0007 = Path(__file__).resolve().parents[1] / "data" / "db_0007.json"
"""A database filled by LiteHit at revision 0007, with the API's answers of that version
(tests/data/make_db_0007.py wrote it)."""


def _load_0007(url: str) -> dict[str, Any]:
    """A database at revision 0007 holding the rows of DB_0007; returns the whole fixture."""
    from datetime import datetime

    from sqlalchemy import DateTime, MetaData

    saved = json.loads(DB_0007.read_text())
    upgrade(url, saved["revision"])
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        for table in meta.sorted_tables:
            rows = saved["tables"].get(table.name, [])
            if table.name == "alembic_version" or not rows:
                continue
            times = {c.name for c in table.columns if isinstance(c.type, DateTime)}
            conn.execute(
                table.insert(),
                [{k: datetime.fromisoformat(v) if k in times and v else v for k, v in row.items()} for row in rows],
            )
    engine.dispose()
    return saved


def _zoneless(value: Any) -> Any:
    """The view with its moments as that version showed SQLite's (no zone: it now says Z)."""
    if isinstance(value, dict):
        return {
            k: v[:-1] if k.endswith("_at") and isinstance(v, str) and v.endswith("Z") else _zoneless(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_zoneless(v) for v in value]
    return value


def test_a_database_filled_at_0007_upgrades_and_answers_as_before(tmp_path: Path) -> None:
    """The four part tables become job_parts row for row, and every service job answers GET
    exactly as that version's API did (a query's links gained its report page, a replay's lanes
    the lane whose core each shared: none then)."""
    from fastapi.testclient import TestClient
    from sqlalchemy import select

    from api.main import create_app
    from litehit.db.models import JobPart
    from litehit.db.session import session_scope
    from litehit.settings import Settings

    url = f"sqlite:///{tmp_path / 'old.db'}"
    saved = _load_0007(url)
    upgrade(url)
    old_parts = sum(len(saved["tables"][t]) for t in ("lane_runs", "sweep_runs", "window_lanes", "profile_lanes"))
    with session_scope(url) as session:
        parts = list(session.scalars(select(JobPart)))
    assert len(parts) == old_parts
    settings = Settings(home=tmp_path / "home", database_url=url, sweep_interval_s=0)
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        for name, case in saved["views"].items():
            got = client.get(case["url"])
            assert got.status_code == 200, (name, got.text)
            now, then = _zoneless(got.json()), case["view"]
            if name == "query":
                assert now["links"].pop("report") == case["url"] + "/report.html"
            if name == "replay":
                assert [lane.pop("shares_core_with") for lane in now["lanes"]] == [None] * len(now["lanes"])
            assert now == then, name


@pytest.mark.service
def test_a_postgresql_database_filled_at_0007_upgrades_and_downgrades() -> None:
    from service_fixtures import create_database, drop_database
    from sqlalchemy import inspect, text

    name, url = create_database()
    try:
        saved = _load_0007(url)
        upgrade(url)
        engine = create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM job_parts")).scalar() == sum(
                len(saved["tables"][t]) for t in ("lane_runs", "sweep_runs", "window_lanes", "profile_lanes")
            )
        downgrade(url, "0007")  # and back: the part tables again, row for row
        with engine.connect() as conn:
            for table in ("lane_runs", "sweep_runs", "window_lanes", "profile_lanes"):
                assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == len(saved["tables"][table])
        assert "job_parts" not in inspect(engine).get_table_names()
        engine.dispose()
    finally:
        drop_database(name)


def test_commands_started_together_on_a_new_home_migrate_it_once(tmp_path: Path) -> None:
    """Several recording children first meeting a new embedded database: one migrates it, the
    others wait for it (without the lock, all but one failed with 'table ... already exists')."""
    import subprocess
    import sys

    from litehit.db.migrate import SCHEMA_HEAD, current_revision

    url = f"sqlite:///{tmp_path / 'home' / 'litehit.db'}"
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "from litehit.jobs.records import ensure_schema\n"
        "import alembic.command, litehit.db.migrate  # (imported before the start: a closer race)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
        f"ensure_schema({url!r})\n"
    )
    children = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(4)]
    go.touch()
    errors = [child.communicate(timeout=120)[1] for child in children]
    assert [child.returncode for child in children] == [0] * 4, errors
    assert current_revision(url) == SCHEMA_HEAD
