"""The CLI records its runs in the embedded database; ``litehit jobs`` lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litehit.cli import main
from litehit.settings import get_settings


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LITEHIT_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield tmp_path / "home"
    get_settings.cache_clear()


def test_runs_are_recorded_and_listed(
    home: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert (
        main(["replay", str(data_dir / "conversation_trace.jsonl"), "--block-sizes", "512,1024", "-o", str(out)]) == 0
    )
    replay_id = capsys.readouterr().out.split("job: ")[1].split()[0]
    assert main(["query", str(out / "litehit_facts.csv"), "--capacity-gb", "1", "-1"]) == 0
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--format", "mooncake", "-o", str(out)]) == 1
    capsys.readouterr()
    assert (home / "litehit.db").exists()
    assert main(["jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[1:4] for line in lines] == [
        ["replay", "cli", "failed"],
        ["query", "cli", "succeeded"],
        ["replay", "cli", "succeeded"],
    ]
    assert "cannot open trace" in lines[0]
    assert main(["jobs", "--show", replay_id]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "succeeded" and shown["output_path"] == str((out / "litehit_facts.csv").resolve())
    assert [lane["instance_id"] for lane in shown["lanes"]] == ["b512", "b1024"]
    assert shown["lanes"][0]["unique_blocks"] == 170899
    query = next(line.split()[0] for line in lines if " query " in line)
    assert main(["jobs", "--show", query]) == 0
    summaries = json.loads(capsys.readouterr().out)["summaries"]
    assert len(summaries) == 2 * 3 and {s["instance_id"] for s in summaries} == {"b512", "b1024", ""}


def test_an_unusable_database_only_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LITEHIT_DATABASE_URL", f"sqlite:///{tmp_path}")  # a directory, not a database file
    get_settings.cache_clear()
    try:
        assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(tmp_path / "o")]) == 0
        assert "warning: not recording this run" in capsys.readouterr().err
        assert (tmp_path / "o" / "litehit_facts.csv").exists()
    finally:
        get_settings.cache_clear()


def test_recording_can_be_switched_off(
    home: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("LITEHIT_RECORD_JOBS", "0")
    get_settings.cache_clear()
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(tmp_path / "o")]) == 0
    assert not (home / "litehit.db").exists()


def test_migrate_creates_the_schema_once_and_is_idempotent(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from litehit.db.migrate import SCHEMA_HEAD, current_revision

    url = get_settings().db_url
    assert current_revision(url) is None
    assert main(["migrate"]) == 0
    assert capsys.readouterr().out == f"database at revision {SCHEMA_HEAD}\n"
    assert current_revision(url) == SCHEMA_HEAD
    assert main(["migrate"]) == 0
    assert capsys.readouterr().out == f"database at revision {SCHEMA_HEAD}\n"


def test_every_kind_is_recorded_as_the_service_records_it(
    home: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """policies, window and profile runs are jobs too: the job row, one succeeded part row per
    part with its result (as the API shows parts), and the kind's summary rows."""
    trace = str(data_dir / "conversation_trace.jsonl")
    runs = {
        "policy_sweep": ["policies", trace, "--capacity-gb", "1", "4", "--policies", "lru,fifo"],
        "window": ["window", trace, "--capacity-gb", "1"],
        "profile": ["profile", trace, "--block-sizes", "512,1024", "-o", str(tmp_path / "p.json")],
    }
    ids = {}
    for kind, argv in runs.items():
        assert main(argv) == 0
        ids[kind] = capsys.readouterr().out.split("job: ")[1].split()[0]
    for kind, job_id in ids.items():
        assert main(["jobs", "--kind", kind]) == 0
        listed = capsys.readouterr().out.splitlines()[1:]
        assert [line.split()[:4] for line in listed] == [[job_id, kind, "cli", "succeeded"]]
    assert main(["jobs", "--show", ids["policy_sweep"]]) == 0
    sweep = json.loads(capsys.readouterr().out)
    assert [(r["policy"], r["capacity_gb"], r["state"]) for r in sweep["runs"]] == [
        ("lru", 1.0, "succeeded"),
        ("lru", 4.0, "succeeded"),
        ("fifo", 1.0, "succeeded"),
        ("fifo", 4.0, "succeeded"),
    ]
    assert all(r["requests"] == 12031 and r["hit_ratio"] > 0 for r in sweep["runs"])
    assert main(["jobs", "--show", ids["window"]]) == 0
    window = json.loads(capsys.readouterr().out)
    assert [lane["instance_id"] for lane in window["lanes"]] == ["b512"]
    assert window["lanes"][0]["evicted"] + window["lanes"][0]["no_match"] > 0
    assert main(["jobs", "--show", ids["profile"]]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert [lane["requests"] for lane in profile["lanes"]] == [12031, 12031]
    assert [(s["instance_id"], s["category"]) for s in profile["summaries"]] == [
        ("b512", None),
        ("b512", "all"),
        ("b1024", None),
        ("b1024", "all"),
    ]
    assert profile["output_path"] == str((tmp_path / "p.json").resolve())


def test_the_demo_explains_its_lanes_and_its_kv_bytes_and_records_its_runs(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "lanes: b512 = 512-token blocks, no TTL; b1024 = 1024-token blocks, no TTL; b512_ttl60 = 512-token" in out
    assert "note: KV bytes per token not given: assuming 2048 B/token" in out
    ids = out.split("jobs: ")[1].split(" (litehit jobs)")[0].split(", ")
    assert main(["jobs"]) == 0
    listed = {line.split()[0]: line.split()[1:4] for line in capsys.readouterr().out.splitlines()[1:]}
    assert [listed[i] for i in ids] == [["replay", "cli", "succeeded"], ["query", "cli", "succeeded"]]
