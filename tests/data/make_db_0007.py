"""Fills a database the way LiteHit did at schema revision 0007 (commit 5a44bcb, before the job
registry), and writes it as tests/data/db_0007.json: every table's rows, and the API's answer for
every service job. tests/litehit/test_migrations.py loads those rows into a database at revision
0007, upgrades it to head and compares the new API's answers with these.

It imports modules of that revision (worker.jobs, ...): run it from a checkout of 5a44bcb, with
that checkout's environment::

    git worktree add /tmp/litehit-0007 5a44bcb && cd /tmp/litehit-0007 && python3 -m venv .venv
    .venv/bin/pip install -e '.[dev]' && .venv/bin/python <this checkout>/tests/data/make_db_0007.py OUT.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

HOME = Path(tempfile.mkdtemp(prefix="litehit-0007-"))
os.environ["LITEHIT_HOME"] = str(HOME)
os.environ.pop("LITEHIT_DATABASE_URL", None)

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import MetaData, create_engine, select  # noqa: E402
from worker.jobs import profile_job, query_job, replay_job, sweep_job, window_job  # noqa: E402
from worker.jobs.submit import (  # noqa: E402
    create_profile_job,
    create_query_job,
    create_replay_job,
    create_sweep_job,
    create_window_job,
)

from api.main import create_app  # noqa: E402
from litehit.cli import main as cli  # noqa: E402
from litehit.db.migrate import SCHEMA_HEAD, upgrade  # noqa: E402
from litehit.db.session import session_scope  # noqa: E402
from litehit.settings import Settings, get_settings  # noqa: E402
from litehit.storage import Storage  # noqa: E402

assert SCHEMA_HEAD == "0007", SCHEMA_HEAD
TRACE = Path(sys.argv[2] if len(sys.argv) > 2 else "examples/data/conversation_trace.jsonl")
LANE = {
    "location_spec_infos": [{"name": "kv", "size": 1 << 20}],
    "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
    "optimizer_state_info": {"full_location_spec_group_name": "full"},
}
ONE = {
    "trace_file_path": "traces/t.jsonl",
    "block_size": 512,
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g"}],
    "instances": [
        {"instance_group_name": "g", "instance_id": "b512", "block_size": 512, **LANE},
        {"instance_group_name": "g", "instance_id": "b1024", "block_size": 1024, **LANE},
    ],
}
TTL = {
    **ONE,
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}],
    "instances": [
        *ONE["instances"],
        {"instance_group_name": "t60", "instance_id": "b512_ttl60", "block_size": 512, **LANE},
    ],
}


def run_tasks(settings: Settings, first: tuple[Any, ...], *, stop_after: str | None = None) -> None:
    """Runs a job's tasks in process, in order (stop_after: leave the job after that task)."""
    tasks = [first]
    funcs = {
        "litehit.replay.parse": lambda s, j: replay_job.run_parse(s, settings, j, enqueue),
        "litehit.replay.lane": lambda s, j, i: replay_job.run_lane(s, settings, j, i, enqueue),
        "litehit.replay.merge": lambda s, j: replay_job.run_merge(s, settings, j),
        "litehit.query.run": lambda s, j: query_job.run_query(s, settings, j),
        "litehit.sweep.parse": lambda s, j: sweep_job.run_sweep_parse(s, settings, j, enqueue),
        "litehit.sweep.run": lambda s, j, i: sweep_job.run_sweep_run(s, settings, j, i, enqueue),
        "litehit.sweep.merge": lambda s, j: sweep_job.run_sweep_merge(s, settings, j),
        "litehit.window.parse": lambda s, j: window_job.run_window_parse(s, settings, j, enqueue),
        "litehit.window.lane": lambda s, j, i: window_job.run_window_lane(s, settings, j, i, enqueue),
        "litehit.window.merge": lambda s, j: window_job.run_window_merge(s, settings, j),
        "litehit.profile.parse": lambda s, j: profile_job.run_profile_parse(s, settings, j, enqueue),
        "litehit.profile.lane": lambda s, j, i: profile_job.run_profile_lane(s, settings, j, i, enqueue),
        "litehit.profile.merge": lambda s, j: profile_job.run_profile_merge(s, settings, j),
    }

    def enqueue(task: str, *args: Any) -> None:
        tasks.append((task, *args))

    while tasks:
        name, *args = tasks.pop(0)
        with session_scope(settings.db_url) as session:
            funcs[name](session, *args)
        if name == stop_after:
            return


def submit(settings: Settings, create: Any, *args: Any, **kwargs: Any) -> str:
    with session_scope(settings.db_url) as session:
        job, _ = create(session, Storage(settings.storage), *args, **kwargs)
        return str(job.id)


def plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def main() -> None:
    out = Path(sys.argv[1])
    settings = get_settings()
    upgrade(settings.db_url)
    storage = Storage(settings.storage)
    storage.ensure()
    trace = settings.storage / "traces" / "t.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_bytes(b"".join(TRACE.read_bytes().splitlines(keepends=True)[:1500]))
    jobs: dict[str, tuple[str, str]] = {}  # name -> (route, id)

    replay = submit(settings, create_replay_job, TTL)
    run_tasks(settings, ("litehit.replay.parse", replay))
    jobs["replay"] = ("replays", replay)
    query = submit(settings, create_query_job, capacity_gb=[0.5, "2GiB", "20000blocks", -1], replay_id=replay)
    run_tasks(settings, ("litehit.query.run", query))
    jobs["query"] = ("queries", query)
    sweep_options = {"policies": ["lru", "fifo", "wa"], "capacity_gb": [0.25, "1000blocks"], "verify_lru": True}
    sweep = submit(settings, create_sweep_job, ONE, sweep_options)
    run_tasks(settings, ("litehit.sweep.parse", sweep))
    jobs["policy_sweep"] = ("policy-sweeps", sweep)
    window = submit(settings, create_window_job, ONE, {"capacity_gb": 0.5, "coverage": 0.9})
    run_tasks(settings, ("litehit.window.parse", window))
    jobs["window"] = ("windows", window)
    profile = submit(settings, create_profile_job, TTL)
    run_tasks(settings, ("litehit.profile.parse", profile))
    jobs["profile"] = ("profiles", profile)
    parsed = submit(settings, create_sweep_job, ONE, {"policies": ["lfu"], "capacity_gb": [1]})
    run_tasks(settings, ("litehit.sweep.parse", parsed), stop_after="litehit.sweep.parse")
    jobs["sweep_parsed_only"] = ("policy-sweeps", parsed)  # every simulation still queued
    queued = submit(settings, create_replay_job, ONE)
    jobs["replay_queued"] = ("replays", queued)
    # CLI runs, recorded in the same database
    facts = settings.storage / "jobs" / replay / "out" / "litehit_facts.csv"
    cli(["replay", str(trace), "--block-sizes", "512,1024", "-o", str(HOME / "cli-out")])
    cli(["query", str(facts), "--capacity-gb", "1", "-1"])
    cli(["policies", str(trace), "--capacity-gb", "0.5", "--policies", "lru,lfu"])

    views = {}
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        for name, (route, job_id) in jobs.items():
            r = client.get(f"/v1/{route}/{job_id}")
            assert r.status_code == 200, r.text
            views[name] = {"url": f"/v1/{route}/{job_id}", "view": r.json()}
    engine = create_engine(settings.db_url)
    meta = MetaData()
    meta.reflect(engine)
    tables = {}
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            rows = conn.execute(select(table)).mappings()
            tables[table.name] = [{k: plain(v) for k, v in row.items()} for row in rows]
    out.write_text(json.dumps({"revision": SCHEMA_HEAD, "tables": tables, "views": views}, indent=1, sort_keys=True))
    print(f"wrote {out}: {', '.join(f'{t} {len(r)}' for t, r in tables.items())}")


if __name__ == "__main__":
    main()
