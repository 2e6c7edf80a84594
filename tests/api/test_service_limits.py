"""Limits and leftovers of the service: unfinished uploads of a killed API are removed (at
startup and by the recovery sweep, never while an upload writes them), request bodies and
decompressed traces have size limits (413 in the documented error shape), and a database
outage answers 503 with Retry-After in that shape."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.online import create_online_app
from api.routes.traces import _Upload
from litehit.db.migrate import upgrade
from litehit.db.session import session_scope
from litehit.jobs.recovery import sweep
from litehit.settings import Settings

ROWS = b"".join(
    json.dumps({"timestamp": i, "input_length": 1030, "hash_ids": [i, i + 1, i + 2]}).encode() + b"\n"
    for i in range(40)
)


def error_of(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert {"code", "message", "details"} <= set(body["error"])
    return dict(body["error"])


def make_part(storage: Path, trace_id: str, name: str, age_s: float) -> Path:
    path = storage / "uploads" / trace_id / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"timestamp": 1')
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


@pytest.fixture
def local(service_settings: Settings, tmp_path: Path) -> Settings:
    """The test stack's database, a private storage root, no background sweep."""
    return service_settings.model_copy(
        update={"storage_root": tmp_path / "storage", "sweep_interval_s": 0, "upload_part_grace_s": 60.0}
    )


@pytest.mark.service
def test_unfinished_uploads_are_removed_at_startup_and_by_the_sweep(local: Settings) -> None:
    root = local.storage
    orphan = make_part(root, "a", "t.jsonl.part", 120)
    beside = make_part(root, "b", "x.jsonl.part", 120)
    (root / "uploads" / "b" / "t.jsonl").write_bytes(ROWS)  # a finished upload stays
    fresh = make_part(root, "c", "t.jsonl.part", 5)
    with TestClient(create_app(local, enqueue=lambda *a: None)):
        pass
    assert not orphan.parent.exists()
    assert not beside.exists() and (root / "uploads" / "b" / "t.jsonl").read_bytes() == ROWS
    assert fresh.exists()

    # an upload in progress holds a lock on its .part: even when old, the sweep leaves it alone
    upload = _Upload(root / "uploads" / "d" / "t.jsonl", 1 << 20, 1 << 20)
    upload.open()
    os.utime(upload.tmp, (time.time() - 120, time.time() - 120))
    os.utime(fresh, (time.time() - 120, time.time() - 120))
    with session_scope(local.db_url) as session:
        actions = sweep(session, local, lambda *a: None)
    assert "removed unfinished upload uploads/c/t.jsonl.part" in actions
    assert not fresh.parent.exists() and upload.tmp.exists()
    assert upload.file is not None
    upload.file.close()  # the upload's process died: its lock is gone
    with session_scope(local.db_url) as session:
        actions = sweep(session, local, lambda *a: None)
    assert "removed unfinished upload uploads/d/t.jsonl.part" in actions
    assert list((root / "uploads").iterdir()) == [root / "uploads" / "b"]


@pytest.mark.service
def test_json_bodies_over_the_limit_get_413(local: Settings) -> None:
    settings = local.model_copy(update={"max_body_bytes": 1000})
    big = {"trace_id": "x" * 2000}
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        for url in ("/v1/replays", "/v1/queries", "/v1/policy-sweeps", "/v1/windows", "/v1/online/groups"):
            error_of(client.post(url, json=big), 413, "payload_too_large")
        chunked = client.post(  # no Content-Length: counted while read
            "/v1/replays",
            content=iter([b'{"trace_id": "', b"x" * 2000, b'"}']),
            headers={"content-type": "application/json"},
        )
        error_of(chunked, 413, "payload_too_large")
        assert client.post("/v1/replays", json={"trace_id": "x"}).status_code == 422  # small: validated as before
        r = client.post("/v1/traces?name=t.jsonl", content=ROWS)  # uploads have their own limit
        assert r.status_code == 201 and r.json()["size_bytes"] == len(ROWS) > 1000, r.text


def test_online_owner_bodies_over_the_limit_get_413(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, online_snapshot_s=3600, max_body_bytes=1000)
    upgrade(settings.db_url)
    with TestClient(create_online_app(settings)) as owner:
        batch = {"requests": [{"block_keys": list(range(500)), "input_token_len": 1, "timestamp_ns": 1}]}
        error_of(owner.post("/v1/online/instances/i1/trace-queries/batch", json=batch), 413, "payload_too_large")
        error_of(owner.post("/v1/online/groups", json={"name": "g" * 2000}), 413, "payload_too_large")


@pytest.mark.service
def test_decompressed_size_of_an_upload_is_limited(local: Settings) -> None:
    blank = gzip.compress(b"\n" * (200 << 20), compresslevel=1)
    with TestClient(create_app(local, enqueue=lambda *a: None)) as client:
        started = time.monotonic()
        r = client.post("/v1/traces?name=blank.jsonl.gz", content=blank)
        assert time.monotonic() - started < 10
        error_of(r, 422, "unknown_trace_format")
    settings = local.model_copy(update={"max_decompressed_bytes": len(ROWS) - 1})
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        error_of(client.post("/v1/traces?name=t.jsonl.gz", content=gzip.compress(ROWS)), 413, "payload_too_large")
        accepted = client.post("/v1/traces?name=t.jsonl", content=ROWS)  # plain: only the upload limit
        assert accepted.status_code == 201, accepted.text
    # nothing is left of the refused uploads
    assert [p.name for p in (settings.storage / "uploads").iterdir()] == [accepted.json()["id"]]


def test_a_database_outage_answers_503_in_the_error_shape(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, database_url="postgresql://litehit@127.0.0.1:1/none", sweep_interval_s=0)
    with TestClient(create_app(settings, enqueue=lambda *a: None)) as client:
        for r in (client.get("/v1/replays"), client.get("/v1/traces/abc"), client.post("/v1/traces", content=ROWS)):
            error_of(r, 503, "service_unavailable")
            assert r.headers["retry-after"] == "5"
        assert client.get("/healthz").status_code == 200
