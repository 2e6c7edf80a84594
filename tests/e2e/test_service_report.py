"""``GET /v1/queries/{id}/report.html`` on the real stack (PostgreSQL, Redis, Celery workers): the
page of ``litehit report`` for a succeeded query, built from its replay's facts, capacities and
targets, with the replay's config and uploaded trace as provenance."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from test_report import CONFIG, LANES, Page
from test_service_api import upload, wait_job

from litehit.settings import Settings

pytestmark = pytest.mark.service


def head(data_dir: Path, lines: int) -> bytes:
    return b"".join((data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:lines])


@pytest.fixture
def replay(api: Any, data_dir: Path) -> dict[str, Any]:
    data = head(data_dir, 2000)
    trace = upload(api, data, "head2000.jsonl")
    job = wait_job(api, api.post("/v1/replays", json={**CONFIG, "trace_id": trace["id"]}).headers["location"])
    assert job["state"] == "succeeded", job
    return {**job, "trace": trace, "trace_sha256": hashlib.sha256(data).hexdigest()}


def test_the_report_of_a_succeeded_query(api: Any, replay: dict[str, Any]) -> None:
    body = {"replay_id": replay["id"], "capacity_gb": [0.5, "1", "inf"], "targets": [0.5, 0.9]}
    query = wait_job(api, api.post("/v1/queries", json=body).headers["location"])
    assert query["state"] == "succeeded", query
    r = api.get(f"/v1/queries/{query['id']}/report.html")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    text = r.text
    assert "http://" not in text and "https://" not in text and "<script" not in text
    page = Page(text)
    assert sorted(c["data-instance"] for c in page.having("svg", "lane-curve")) == sorted(LANES)
    # the table holds the numbers the query stored in SQL, exactly
    cells = {(c["data-instance"], int(c["data-slot"])): c for c in page.having("td", "rate")}
    assert len(cells) == len(LANES) * 3
    for summary in query["instances"]:
        assert summary["capacity_gb"] == [0.5, 1.0, -1.0]
        for k, rate in enumerate(summary["hit_rates"]):
            cell = cells[(summary["instance_id"], k)]
            assert float(cell["data-hit-rate"]) == rate
            assert int(cell["data-hit-tokens"]) == summary["total_hit_tokens"][k]
    # the query's targets (fractions of the plateau), not the CLI default
    fractions = [a["data-fraction"] for a in page.having("g", "target") if "data-fraction" in a]
    assert fractions == ["0.5", "0.9"] * len(LANES)
    words = "".join(page.text)
    assert f"query job{query['id']}" in words and f"replay job{replay['id']}" in words
    assert f"trace sha256{replay['trace_sha256']}" in words and "trace namehead2000.jsonl" in words
    assert "512 tokens/block, 1 MiB/block, TTL 60 s" in words  # the lane setups from the replay config
    assert "expired (TTL)" in words  # extended facts: cold and expired apart


def test_unknown_and_unfinished_queries_answer_the_error_shape(
    api: Any, data_dir: Path, service_settings: Settings
) -> None:
    from fastapi.testclient import TestClient

    from api.main import create_app

    r = api.get("/v1/queries/0123456789abcdef0123456789abcdef/report.html")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    # an app that never enqueues: the query stays queued; and the bearer token applies
    settings = service_settings.model_copy(update={"api_token": "s3cret", "sweep_interval_s": 0})
    auth = {"Authorization": "Bearer s3cret"}
    with TestClient(create_app(settings, enqueue=lambda *_: None)) as client:
        r = client.post("/v1/traces?name=t.jsonl", content=head(data_dir, 10), headers=auth)
        assert r.status_code == 201, r.text
        r = client.post("/v1/replays", json={**CONFIG, "trace_id": r.json()["id"]}, headers=auth)
        assert r.status_code == 202, r.text
        r = client.post("/v1/queries", json={"replay_id": r.json()["id"], "capacity_gb": [1]}, headers=auth)
        assert r.status_code == 202, r.text
        url = f"/v1/queries/{r.json()['id']}/report.html"
        r = client.get(url)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = client.get(url, headers=auth)
        assert r.status_code == 409
        assert r.json() == {
            "error": {
                "code": "not_ready",
                "message": "the query is queued; its report exists only once it succeeded",
                "details": [],
            }
        }
