"""The HTTP service end to end: real PostgreSQL (Alembic-migrated), real Redis, real Celery
worker processes. Submit over HTTP, poll, compare with the golden curves and the CLI."""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from sqlalchemy import select

from litehit.db.models import QuerySummary
from litehit.db.session import session_scope
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings

pytestmark = pytest.mark.service

CONFIG: dict[str, Any] = {
    "block_size": 512,
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}],
    "instances": [
        instance("b512", 512, group="g", sizes=(1 << 20,)),
        instance("b1024", 1024, group="g", sizes=(1 << 21,)),
        instance("b512_ttl60", 512, group="t60", sizes=(1 << 20,)),
    ],
}


def wait_job(api: Any, url: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = api.get(url).json()
        if body["state"] in ("succeeded", "failed", "cancelled"):
            return body
        assert time.monotonic() < deadline, f"job still {body['state']} after {timeout} s: {body}"
        time.sleep(0.1)


def upload(api: Any, data: bytes, name: str) -> dict[str, Any]:
    r = api.post(f"/v1/traces?name={name}", content=data)
    assert r.status_code == 201, r.text
    return r.json()


def test_replay_over_http_reproduces_the_golden_curves(api: Any, data_dir: Path) -> None:
    data = (data_dir / "conversation_trace.jsonl").read_bytes()
    compressed = gzip.compress(data)
    trace = upload(api, compressed, "conversation.jsonl.gz")
    assert trace["compression"] == "gzip" and trace["trace_format"] == "mooncake"
    assert trace["size_bytes"] == len(compressed)
    r = api.post("/v1/replays", json={**CONFIG, "trace_id": trace["id"]})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/replays/{r.json()['id']}"
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    assert [lane["state"] for lane in job["lanes"]] == ["succeeded"] * 3
    assert job["lanes"][0]["requests"] == job["lanes"][0]["requests_total"] == 12031
    assert job["stats"]["reads"] == 12031 and job["stats"]["facts_rows"] == 3 * 12031
    assert job["stats"]["engine_memory_bytes"] > 0 and job["stats"]["unique_blocks"] > 0
    facts = api.get(job["facts"]["url"])
    assert facts.status_code == 200 and facts.headers["content-type"].startswith("text/csv")
    rows = list(read_facts_text(facts.text))
    for inst, golden in [
        ("b512", "conversation_b512"),
        ("b1024", "conversation_b1024"),
        ("b512_ttl60", "conversation_b512_ttl60"),
    ]:
        assert [r["hit_curve"] for r in rows if r["instance_id"] == inst] == (
            data_dir / f"{golden}.curves"
        ).read_text().splitlines()


def read_facts_text(text: str) -> list[dict[str, str]]:
    import csv

    return list(csv.DictReader(io.StringIO(text)))


def test_query_summaries_in_sql_equal_the_cli_query(
    api: Any, data_dir: Path, service_settings: Settings, tmp_path: Path
) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "conv.jsonl")
    replay = wait_job(api, api.post("/v1/replays", json={**CONFIG, "trace_id": trace["id"]}).headers["location"])
    caps = ["0.5", "1", "2", "4", "8", "16", "-1"]
    r = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": caps, "targets": [0.9]})
    assert r.status_code == 202, r.text
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    facts = service_settings.storage / replay["facts"]["path"]
    out = io.BytesIO()
    cli = query_facts(facts, parse_capacities(caps), out)
    with session_scope(service_settings.db_url) as session:
        rows = session.scalars(select(QuerySummary).where(QuerySummary.job_id == query["id"])).all()
    # three lanes of three setups (block size, TTL): a total per setup (here its one lane), none across
    assert len(rows) == 2 * len(cli.instances) * len(caps)
    by_key = {(r.is_total, r.instance_id, r.slot): r for r in rows}
    setup_key = {
        "b512": "block_size=512,block_bytes=1048576,ttl_seconds=0",
        "b1024": "block_size=1024,block_bytes=2097152,ttl_seconds=0",
        "b512_ttl60": "block_size=512,block_bytes=1048576,ttl_seconds=60",
    }
    for summary, is_total in [*((i, False) for i in cli.instances), *((i, True) for i in cli.instances)]:
        name = summary.instance_id.decode() if summary.instance_id is not None else ""
        for slot in range(len(caps)):
            row = by_key[(is_total, setup_key[name] if is_total else name, slot)]
            assert (row.requests, row.total_input_tokens) == (summary.requests, summary.total_input_tokens)
            assert (row.total_hit_blocks, row.total_hit_tokens) == (
                summary.total_hit_blocks[slot],
                summary.total_hit_tokens[slot],
            )
            assert row.hit_rate == summary.hit_rates[slot]
    assert [i["instance_id"] for i in query["instances"]] == ["b1024", "b512", "b512_ttl60"]
    assert query["total"] is None
    cli_blocks = {(i.instance_id or b"").decode(): i.total_hit_blocks for i in cli.instances}
    assert [(t["instances"], t["total_hit_blocks"]) for t in query["totals"]] == [
        ([name], cli_blocks[name]) for name in ("b512", "b512_ttl60", "b1024")
    ]
    requests = api.get(query["links"]["requests"])
    assert requests.text.encode() == out.getvalue()
    curve = api.get(query["links"]["curve"]).json()
    assert {c["instance_id"] for c in curve["instances"]} == {"b512", "b1024", "b512_ttl60"}
    assert api.get(query["links"]["plot"]).content[:4] == b"\x89PNG"


def test_two_lanes_run_on_two_worker_processes_at_once(api: Any, tmp_path: Path) -> None:
    lines = []
    for i in range(60_000):  # long enough lanes to overlap
        ids = list(range(i * 7, i * 7 + 40))
        lines.append(json.dumps({"timestamp": i, "input_length": 512 * 40, "hash_ids": ids}))
    trace = upload(api, ("\n".join(lines) + "\n").encode(), "long.jsonl")
    config = {**CONFIG, "instances": CONFIG["instances"][:2], "instance_groups": CONFIG["instance_groups"][:1]}
    job = wait_job(api, api.post("/v1/replays", json={**config, "trace_id": trace["id"]}).headers["location"])
    assert job["state"] == "succeeded", job["error"]
    a, b = job["lanes"]
    assert a["worker"] != b["worker"], "both lanes ran in the same worker process"
    assert max(a["started_at"], b["started_at"]) < min(a["finished_at"], b["finished_at"]), "the lanes did not overlap"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({**CONFIG, "trace_file_path": "x.jsonl", "block_size": "512"}, ["body", "block_size"]),
        (
            {**CONFIG, "trace_file_path": "x.jsonl", "instances": [{**instance("a", 500)}]},
            ["body", "instances", 0, "block_size"],
        ),
        ({**CONFIG, "trace_file_path": "x.jsonl", "fanout_all_instances": "yes"}, ["body", "fanout_all_instances"]),
        ({**CONFIG, "trace_file_path": "missing.jsonl"}, ["body", "trace_file_path"]),
        ({**CONFIG, "trace_id": "0" * 32}, ["body", "trace_id"]),
        ({**CONFIG}, ["body", "trace_file_path"]),
    ],
)
def test_bad_specs_get_422_with_field_paths(api: Any, body: dict[str, Any], loc: list[Any]) -> None:
    r = api.post("/v1/replays", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "validation_error" and err["message"]
    assert any(d["loc"][: len(loc)] == loc for d in err["details"]), err


@pytest.mark.parametrize(
    "path",
    ["../secret.jsonl", "/etc/passwd", "uploads/../../secret.jsonl", "link-out/passwd", "link-file.jsonl"],
)
def test_paths_leaving_the_storage_root_are_rejected(api: Any, service_settings: Settings, path: str) -> None:
    root = service_settings.storage
    outside = root.parent / "secret.jsonl"
    outside.write_text('{"timestamp": 1, "input_length": 512, "hash_ids": [1]}\n')
    for name, target in [("link-out", Path("/etc")), ("link-file.jsonl", outside)]:
        if not (root / name).is_symlink():
            os.symlink(target, root / name)
    r = api.post("/v1/replays", json={**CONFIG, "trace_file_path": path})
    assert r.status_code == 422, r.text
    assert "storage root" in r.text or "'..'" in r.text


def test_unknown_ids_get_404(api: Any) -> None:
    for url in [
        "/v1/replays/nope",
        "/v1/replays/nope/facts",
        "/v1/queries/nope",
        "/v1/queries/nope/curve",
        "/v1/traces/nope",
    ]:
        r = api.get(url)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", url
    assert api.delete("/v1/replays/nope").status_code == 404
    r = api.post("/v1/queries", json={"replay_id": "nope", "capacity_gb": [1]})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "replay_id"]


def test_conflicting_states_get_409(api: Any, data_dir: Path) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "c.jsonl")
    r = api.post("/v1/replays", json={**CONFIG, "trace_id": trace["id"]})
    job = wait_job(api, r.headers["location"])
    assert api.delete(f"/v1/replays/{job['id']}").status_code == 409
    broken = upload(api, b'{"timestamp": 1, "input_length": 512, "hash_ids": [1]}\n{"timestamp": 2}\n', "broken.jsonl")
    bad = api.post("/v1/replays", json={**CONFIG, "trace_id": broken["id"]})
    failed = wait_job(api, bad.headers["location"])
    assert failed["state"] == "failed"
    assert (
        failed["error"].startswith("failed to load/replay trace: ")
        and "broken.jsonl:2: missing integer field: input_length" in failed["error"]
    )
    assert api.get(f"/v1/replays/{failed['id']}/facts").status_code == 409


def test_idempotency_key(api: Any, data_dir: Path) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "c.jsonl")
    body = {**CONFIG, "trace_id": trace["id"]}
    first = api.post("/v1/replays", json=body, headers={"Idempotency-Key": "k-1"})
    again = api.post("/v1/replays", json=body, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    other = api.post("/v1/replays", json={**body, "block_size": 256}, headers={"Idempotency-Key": "k-1"})
    assert other.status_code == 409


def test_cancel_a_running_replay(api: Any, tmp_path: Path) -> None:
    lines = [
        json.dumps({"timestamp": i, "input_length": 512 * 30, "hash_ids": list(range(i, i + 30))})
        for i in range(600_000)
    ]
    trace = upload(api, ("\n".join(lines) + "\n").encode(), "big.jsonl")
    r = api.post("/v1/replays", json={**CONFIG, "trace_id": trace["id"]})
    deadline = time.monotonic() + 60
    while api.get(r.headers["location"]).json()["state"] == "queued" and time.monotonic() < deadline:
        time.sleep(0.02)
    cancel = api.delete(r.headers["location"])
    assert cancel.status_code == 200 and cancel.json()["cancel_requested"], cancel.text
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "cancelled" and job["facts"] is None, job
    assert api.delete(r.headers["location"]).status_code == 409


def test_lists_paginate(api: Any, data_dir: Path) -> None:
    data = (data_dir / "conversation_trace.jsonl").read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\n"
    for i in range(3):
        upload(api, data, f"t{i}.jsonl")
    page = api.get("/v1/traces?limit=2").json()
    assert len(page["items"]) == 2 and page["total"] >= 3 and page["next_offset"] == 2
    rest = api.get(f"/v1/traces?limit=2&offset={page['next_offset']}").json()
    assert {t["id"] for t in rest["items"]}.isdisjoint({t["id"] for t in page["items"]})
    assert api.get("/v1/replays?limit=1").json()["limit"] == 1
    assert api.get("/v1/traces?limit=0").status_code == 422


def test_uploads_are_checked(api: Any, service_settings: Settings) -> None:
    r = api.post("/v1/traces?name=../../evil.jsonl", content=b"not json\n")
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_trace_format"
    assert api.post("/v1/traces", content=b"").status_code == 422
    ok = upload(api, b'{"timestamp": 1, "input_length": 512, "hash_ids": [1]}\n', "../../evil.jsonl")
    assert ok["path"].startswith("uploads/") and ".." not in ok["path"]
    assert (
        ok["sha256"]
        == __import__("hashlib").sha256(b'{"timestamp": 1, "input_length": 512, "hash_ids": [1]}\n').hexdigest()
    )


def test_health_and_readiness(api: Any) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok", "broker": "ok"}
    assert "/v1/replays" in api.get("/openapi.json").json()["paths"]
