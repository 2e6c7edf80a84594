"""Client mistakes never get a 5xx: non-finite numbers, NUL bytes, huge offsets, unusable paths,
configs without block bytes and deeply nested bodies get 404/422 in the documented error shape,
against the real stack (PostgreSQL, Redis, Celery workers); the public API forwards online
requests about an instance id that needs percent-encoding to the right instance."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from helpers import group, instance
from service_fixtures import ROOT, free_port, settings_env, wait_for
from test_service_api import CONFIG, upload, wait_job

from litehit.settings import Settings

pytestmark = pytest.mark.service

DEEP = "<nested deeper than 32 levels>"
ONE_LANE = {**CONFIG, "instances": CONFIG["instances"][:1], "instance_groups": CONFIG["instance_groups"][:1]}


def post_text(client: Any, url: str, text: str) -> Any:
    """A body as written: Python's json module also reads NaN, Infinity and 1e999 (= inf)."""
    return client.post(url, content=text, headers={"content-type": "application/json"})


def error_of(r: Any, status: int = 422) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and {"code", "message", "details"} <= set(body["error"]), body
    return dict(body["error"])


@pytest.fixture(scope="module")
def small_trace(api_module: Any, data_dir: Path) -> dict[str, Any]:
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:300]
    return upload(api_module, b"".join(lines), "small.jsonl")


@pytest.fixture(scope="module")
def api_module(service_settings: Settings, celery_workers: Any) -> Iterator[TestClient]:
    """The API for this module's tests (one app, like the `api` fixture, kept for the module)."""
    from api.main import create_app

    with TestClient(create_app(service_settings)) as client:
        yield client


@pytest.fixture(scope="module")
def replay_id(api_module: Any, small_trace: dict[str, Any]) -> str:
    r = api_module.post("/v1/replays", json={**ONE_LANE, "trace_id": small_trace["id"]})
    assert r.status_code == 202, r.text
    job = wait_job(api_module, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    return str(job["id"])


@pytest.mark.parametrize("value", ['"inf"', "1e999", "Infinity", '"Infinity"'])
def test_an_infinite_query_capacity_is_the_infinite_slot(api_module: Any, replay_id: str, value: str) -> None:
    """+inf means infinite capacity (as on the command line); the job records it as -1 (JSON
    has no Infinity) and answers the same as -1."""
    r = post_text(api_module, "/v1/queries", f'{{"replay_id":"{replay_id}","capacity_gb":[1,{value}]}}')
    assert r.status_code == 202, r.text
    assert r.json()["spec"]["capacity_gb"] == [1.0, -1.0]
    job = wait_job(api_module, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    reference = api_module.post("/v1/queries", json={"replay_id": replay_id, "capacity_gb": [1, -1]})
    expected = wait_job(api_module, reference.headers["location"])
    assert job["total"] == expected["total"] and job["total"]["capacity_gb"] == [1.0, -1.0]


@pytest.mark.parametrize(
    ("body", "loc", "echo"),
    [
        ('"capacity_gb":[NaN]', ["body", "capacity_gb"], ["NaN"]),
        ('"capacity_gb":[1],"targets":[NaN]', ["body", "targets", 0], "NaN"),
        ('"capacity_gb":[1],"targets":[Infinity]', ["body", "targets", 0], "Infinity"),
        ('"capacity_gb":[1],"targets":[-1e999]', ["body", "targets", 0], "-Infinity"),
    ],
)
def test_non_finite_query_values_are_echoed_as_strings(
    api_module: Any, replay_id: str, body: str, loc: list[Any], echo: Any
) -> None:
    err = error_of(post_text(api_module, "/v1/queries", f'{{"replay_id":"{replay_id}",{body}}}'))
    assert err["details"][0]["loc"] == loc and err["details"][0]["input"] == echo


@pytest.mark.parametrize(
    ("change", "loc", "echo"),
    [
        ('[{"name":"g","capacity_gb":[1e999]}]', ["body", "instance_groups", 0, "capacity_gb", 0], "Infinity"),
        ('[{"name":"g","capacity_gb":[NaN]}]', ["body", "instance_groups", 0, "capacity_gb", 0], "NaN"),
        ('[{"name":"g"}],"future_field":{"x":[Infinity]}', ["body", "future_field"], "Infinity"),
        ('[{"name":"g","x":' + "[" * 40 + "]" * 40 + "}]", ["body", "instance_groups", 0, "x"], DEEP),
    ],
)
def test_replay_configs_with_non_finite_numbers_are_422(
    api_module: Any, small_trace: dict[str, Any], change: str, loc: list[Any], echo: Any
) -> None:
    """Group capacities must be finite; an unknown field is kept with the job, so it must be
    plain JSON (no NaN/Infinity, at most 32 levels deep)."""
    base = json.dumps({**ONE_LANE, "trace_id": small_trace["id"], "instance_groups": "GROUPS"})
    err = error_of(post_text(api_module, "/v1/replays", base.replace('"GROUPS"', change)))
    assert [(d["loc"], d["input"]) for d in err["details"]] == [(loc, echo)]


@pytest.mark.parametrize(
    ("sweep", "loc", "echo"),
    [
        ('{"capacity_gb":[Infinity]}', ["body", "sweep", "capacity_gb", 0], "Infinity"),
        ('{"capacity_gb":[1],"wa_life_seconds":NaN}', ["body", "sweep", "wa_life_seconds"], "NaN"),
    ],
)
def test_non_finite_sweep_values_are_echoed_as_strings(
    api_module: Any, small_trace: dict[str, Any], sweep: str, loc: list[Any], echo: Any
) -> None:
    body = json.dumps({**ONE_LANE, "trace_id": small_trace["id"], "sweep": "SWEEP"}).replace('"SWEEP"', sweep)
    err = error_of(post_text(api_module, "/v1/policy-sweeps", body))
    assert [(d["loc"], d["input"]) for d in err["details"]] == [(loc, echo)]


def test_nul_bytes_in_ids_and_queries_are_404_or_422(api_module: Any, small_trace: dict[str, Any]) -> None:
    for url in [
        "/v1/replays/abc%00",
        "/v1/replays/abc%00/facts",
        "/v1/queries/abc%00",
        "/v1/queries/abc%00/curve",
        "/v1/traces/abc%00",
        "/v1/policy-sweeps/abc%00",
    ]:
        assert error_of(api_module.get(url), 404)["code"] == "not_found", url
    assert error_of(api_module.delete("/v1/replays/abc%00"), 404)["code"] == "not_found"
    assert error_of(api_module.get("/v1/replays?state=%00"))["details"][0]["loc"] == ["query", "state"]
    assert error_of(api_module.get("/v1/replays?state=bogus"))["details"][0]["loc"] == ["query", "state"]
    assert api_module.get("/v1/replays?state=succeeded").status_code == 200
    bodies = [
        ("/v1/replays", {**ONE_LANE, "trace_id": "abc\x00"}, ["body", "trace_id"]),
        ("/v1/replays", {**ONE_LANE, "trace_file_path": "a\x00b"}, ["body", "trace_file_path"]),
        (
            "/v1/replays",
            {**ONE_LANE, "trace_id": small_trace["id"], "instance_groups": [{"name": "g\x00"}]},
            ["body", "instance_groups", 0, "name"],
        ),
        ("/v1/queries", {"replay_id": "abc\x00", "capacity_gb": [1]}, ["body", "replay_id"]),
        ("/v1/queries", {"facts_path": "f\x00", "capacity_gb": [1]}, ["body", "facts_path"]),
    ]
    for url, body, loc in bodies:
        assert error_of(api_module.post(url, json=body))["details"][0]["loc"] == loc


@pytest.mark.parametrize("route", ["/v1/replays", "/v1/queries", "/v1/traces", "/v1/policy-sweeps"])
def test_an_offset_beyond_bigint_is_422(api_module: Any, route: str) -> None:
    err = error_of(api_module.get(f"{route}?offset=99999999999999999999"))
    assert err["details"][0]["loc"] == ["query", "offset"]
    assert api_module.get(f"{route}?offset={2**63 - 1}").json()["items"] == []


def test_a_path_too_long_for_the_file_system_is_422(api_module: Any) -> None:
    long_name = "y" * 300  # one component longer than NAME_MAX: ENAMETOOLONG
    err = error_of(api_module.post("/v1/replays", json={**ONE_LANE, "trace_file_path": long_name}))
    assert err["details"][0]["loc"] == ["body", "trace_file_path"] and "too long" in err["message"]
    err = error_of(api_module.post("/v1/queries", json={"facts_path": long_name, "capacity_gb": [1]}))
    assert err["details"][0]["loc"] == ["body", "facts_path"] and "too long" in err["message"]


def test_a_full_spec_group_without_specs_is_422(api_module: Any, small_trace: dict[str, Any]) -> None:
    """Its block_bytes would be 0: the online registration divided by it; replays reject it too."""
    inst = {**instance("b512", 512, group="g"), "location_spec_groups": [{"name": "full", "spec_names": []}]}
    err = error_of(
        api_module.post("/v1/replays", json={**ONE_LANE, "trace_id": small_trace["id"], "instances": [inst]})
    )
    assert err["details"][0]["loc"] == ["body", "instances", 0, "location_spec_groups", 0, "spec_names"]
    assert "the full spec group names no spec" in err["message"]


@pytest.mark.parametrize("depth", [40, 500, 950, 5000, 100_000])
def test_deeply_nested_bodies_are_422(api_module: Any, small_trace: dict[str, Any], depth: int) -> None:
    nested = "[" * depth + "]" * depth
    base = json.dumps({**ONE_LANE, "trace_id": small_trace["id"]})
    for url, text in [
        ("/v1/replays", base[:-1] + f',"x":{nested}}}'),
        ("/v1/replays", nested),
        ("/v1/queries", f'{{"capacity_gb":{nested}}}'),
    ]:
        err = error_of(post_text(api_module, url, text))
        assert err["code"] == "validation_error" and len(json.dumps(err)) < 10_000, err


# Online: the owner's own routes (a real owner process behind the public API)


@pytest.fixture(scope="module")
def online(service_settings: Settings) -> Iterator[TestClient]:
    """The public API in front of one real online owner process (uvicorn api.online:app)."""
    from api.main import create_app

    port = free_port()
    settings = service_settings.model_copy(update={"online_shards": 1, "online_shard": 0})
    owner = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "api.online:app", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=settings_env(settings),
    )
    try:
        wait_for(lambda: _owner_ok(port), 30, "the online owner")
        api_settings = settings.model_copy(update={"online_urls": f"http://127.0.0.1:{port}", "sweep_interval_s": 0})
        with TestClient(create_app(api_settings, enqueue=lambda *a: None)) as client:
            r = client.post("/v1/online/groups", json=group("robust", 60, capacity_gb=[1.0]))
            assert r.status_code in (201, 409), r.text
            yield client
    finally:
        owner.terminate()
        owner.wait(timeout=20)


def _owner_ok(port: int) -> bool:
    import httpx

    try:
        return bool(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json().get("status") == "ok")
    except (httpx.HTTPError, ValueError):
        return False


def test_forwarding_encodes_the_instance_id(online: TestClient) -> None:
    """The id is one path segment of the owner's URL: 'victim#junk' is not 'victim', and a
    control character is an unknown id, not an invalid URL."""
    assert online.post("/v1/online/instances", json=instance("victim", 4, group="robust")).status_code == 201
    assert error_of(online.delete("/v1/online/instances/victim%23junk"), 404)["code"] == "not_found"
    assert error_of(online.delete("/v1/online/instances/victim%3Fx=1"), 404)["code"] == "not_found"
    assert error_of(online.get("/v1/online/instances/%0D"), 404)["code"] == "not_found"
    assert error_of(online.get("/v1/online/instances/a%00"), 404)["code"] == "not_found"
    r = online.post("/v1/online/instances/victim%23junk/trace-queries", json={"block_keys": [1]})
    assert error_of(r, 404)["code"] == "not_found"
    assert online.get("/v1/online/instances/victim").status_code == 200
    assert online.delete("/v1/online/instances/victim").status_code == 200
    odd = "odd #?%\r id"
    assert online.post("/v1/online/instances", json=instance(odd, 4, group="robust")).status_code == 201
    r = online.post(f"/v1/online/instances/{quote(odd, safe='')}/trace-queries", json={"block_keys": [1, 2]})
    assert r.status_code == 200 and r.json()["instance_id"] == odd, r.text
    assert online.delete(f"/v1/online/instances/{quote(odd, safe='')}").json()["total_queries"] == 1
    assert online.get("/v1/online/instances/odd%20").status_code == 404


def test_online_registrations_reject_what_sql_or_the_engine_cannot_take(online: TestClient) -> None:
    err = error_of(post_text(online, "/v1/online/groups", '{"name":"inf","capacity_gb":[1e999]}'))
    assert err["details"][0]["loc"] == ["body", "capacity_gb", 0] and err["details"][0]["input"] == "Infinity"
    err = error_of(post_text(online, "/v1/online/groups", '{"name":"nan","capacity_gb":[NaN]}'))
    assert err["details"][0]["input"] == "NaN"
    err = error_of(online.post("/v1/online/groups", json={"name": "nul\x00", "capacity_gb": [1.0]}))
    assert err["details"][0]["loc"] == ["body", "name"]
    err = error_of(online.post("/v1/online/instances", json=instance("nul\x00", 4, group="robust")))
    assert err["details"][0]["loc"] == ["body", "instance_id"]
    empty = {**instance("nospecs", 4, group="robust"), "location_spec_groups": [{"name": "full", "spec_names": []}]}
    err = error_of(online.post("/v1/online/instances", json=empty))
    assert err["details"][0]["loc"] == ["body", "location_spec_groups", 0, "spec_names"]
    assert online.get("/v1/online/instances/nospecs").status_code == 404


@pytest.mark.parametrize("depth", [40, 500, 950, 5000, 100_000])
def test_online_deeply_nested_bodies_are_422(online: TestClient, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    inst = json.dumps(instance(f"deep{depth}", 4, group="robust"))
    for url, text in [
        ("/v1/online/groups", f'{{"name":"deep{depth}","x":{nested}}}'),
        ("/v1/online/instances", inst[:-1] + f',"x":{nested}}}'),
        ("/v1/online/instances/victim/trace-queries", f'{{"block_keys":[{nested}]}}'),
        ("/v1/online/instances/victim/trace-queries/batch", f'{{"requests":[{{"block_keys":{nested}}}]}}'),
    ]:
        err = error_of(post_text(online, url, text))
        assert err["code"] == "validation_error" and len(json.dumps(err)) < 10_000, (url, err)
