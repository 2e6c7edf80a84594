"""The routing what-if over HTTP, on real Celery worker processes: ``POST /v1/routes`` runs one
lane task per router x replica and publishes routes.json, its plot and each router's facts; the
bytes equal ``litehit routes -o`` on the same trace and options, the job lists its replicas, the
facts are ordinary facts (a query of them answers), and bad options are 422 naming the field."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, instance, write_rows
from test_service_api import upload, wait_job

from litehit.cli import main
from litehit.routes.result import RoutesResult

pytestmark = pytest.mark.service

NS = 10**9
PNG = b"\x89PNG\r\n\x1a\n"
CONFIG: dict[str, Any] = {
    "block_size": 4,
    "trace_format": "standard",
    "instance_groups": [group("g", 0, enable_prefix_hash=True)],
    "instances": [instance("pool", 4, group="g", sizes=(4096, 4096))],
}
ROUTES = {"replicas": 3, "capacities": ["4blocks", "64KiB", "inf"], "seed": 7, "prefix_blocks": 2}
ROUTES_ARGV = ["--replicas", "3", "--capacity", "4blocks", "64KiB", "inf", "--seed", "7", "--prefix-blocks", "2"]


def write_trace(path: Path, seed: int) -> Path:
    """Requests on a prefix tree under a few conversation roots; the instance ids are ignored."""
    rng = random.Random(seed)
    paths: list[list[int]] = []
    rows = []
    t = NS
    for i in range(150):
        if not paths or rng.random() < 0.2:
            keys = [rng.randrange(1 << 62), *(rng.randrange(1 << 62) for _ in range(rng.randint(0, 4)))]
        else:
            earlier = rng.choice(paths[-8:])
            keys = earlier[: rng.randint(1, len(earlier))] + [rng.randrange(1 << 62) for _ in range(rng.randint(0, 3))]
        paths.append(keys)
        rows.append({"type": "request", "instance_id": rng.choice(("a", "b")), "trace_id": f"q{i}", "timestamp_ns": t,
                     "keys": keys, "input_len": 4 * len(keys) + rng.randrange(4)})  # fmt: skip
        t += int(rng.choice((0, 0.5, 1, 3)) * NS)
    return write_rows(path, rows)


@pytest.fixture
def routed(api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    trace = write_trace(tmp_path / "trace.jsonl", seed=23)
    uploaded = upload(api, trace.read_bytes(), "routes.jsonl")
    r = api.post("/v1/routes", json={**CONFIG, "trace_id": uploaded["id"], "routes": ROUTES})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/routes/{r.json()['id']}"
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    local = tmp_path / "config.json"
    local.write_text(json.dumps(config(trace, tmp_path / "unused", **CONFIG)))
    out = tmp_path / "cli" / "routes.json"
    assert main(["routes", str(local), *ROUTES_ARGV, "-o", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return {"job": job, "cli": out}


def test_routes_over_http_equal_the_cli(api: Any, routed: dict[str, Any]) -> None:
    job, out = routed["job"], routed["cli"]
    served = api.get(f"/v1/routes/{job['id']}/result")
    assert served.status_code == 200 and served.headers["content-type"].startswith("application/json")
    assert served.content == out.read_bytes()
    doc = json.loads(served.content)
    assert doc["replicas"] == 3
    assert [r["router"] for r in doc["routers"]] == ["round_robin", "random", "session", "prefix_hash"]
    for entry in doc["routers"]:
        facts = api.get(f"/v1/routes/{job['id']}/facts/{entry['router']}")
        assert facts.status_code == 200 and facts.headers["content-type"].startswith("text/csv")
        assert facts.content == (out.parent / entry["facts"]).read_bytes()
        assert sum(r["requests"] for r in entry["capacities"][0]["replicas"]) == 150
    # one part per router x replica, named by both
    assert [(lane["router"], lane["replica"], lane["instance_id"]) for lane in job["lanes"]] == [
        (r, j, f"r{j}") for r in ("round_robin", "random", "session", "prefix_hash") for j in range(3)
    ]
    assert all(lane["state"] == "succeeded" for lane in job["lanes"])
    assert sum(lane["requests"] for lane in job["lanes"]) == 4 * 150
    plot = api.get(f"/v1/routes/{job['id']}/plot.png")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/png" and plot.content[:8] == PNG
    assert job["links"]["result"].endswith(f"/v1/routes/{job['id']}/result")
    assert job["id"] in [item["id"] for item in api.get("/v1/routes?state=succeeded").json()["items"]]


def test_a_routers_facts_answer_a_query_over_http(api: Any, routed: dict[str, Any]) -> None:
    """The published facts are ordinary facts: a query of them gives the replicas' hits."""
    job, doc = routed["job"], json.loads(routed["cli"].read_bytes())
    round_robin = doc["routers"][0]
    path = f"jobs/{job['id']}/out/{round_robin['facts']}"
    r = api.post("/v1/queries", json={"facts_path": path, "capacity_gb": ["4blocks"]})
    assert r.status_code == 202, r.text
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    at = round_robin["capacities"][0]
    got = {entry["instance_id"]: entry["total_hit_tokens"][0] for entry in query["instances"]}
    assert got == {f"r{r['replica']}": r["hit_tokens"] for r in at["replicas"] if r["requests"]}
    assert query["total"]["total_hit_tokens"] == [at["hit_tokens"]]
    assert query["total"]["hit_rates"] == [pytest.approx(at["hit_rate"], abs=1e-6)]


@pytest.mark.parametrize(
    ("patch", "loc", "words"),
    [
        ({"replicas": 0}, ["body", "routes", "replicas"], "greater than or equal to 1"),
        ({"replicas": 5000}, ["body", "routes", "replicas"], "less than or equal to 1024"),
        (
            {"routers": ["round_robin", "cache_aware"], "capacities": []},
            ["body", "routes", "capacities"],
            "give at least one capacity",
        ),
        ({"balance_threshold": -0.5}, ["body", "routes", "balance_threshold"], "greater than or equal to 0"),
        ({"balance_threshold": 1e-10}, ["body", "routes", "balance_threshold"], "decimal places"),
        ({"load_window_s": 0}, ["body", "routes", "load_window_s"], "greater than or equal to"),
        ({"routers": ["nearest"]}, ["body", "routes", "routers", 0], "round_robin"),
        ({"prefix_blocks": 0}, ["body", "routes", "prefix_blocks"], "greater than or equal to 1"),
        ({"capacities": ["-1GiB"]}, ["body", "routes", "capacities"], "negative"),
        ({"replica": 3}, ["body", "routes", "replica"], "Extra inputs are not permitted"),
    ],
)
def test_bad_options_get_422_naming_the_field(api: Any, patch: dict[str, Any], loc: list[Any], words: str) -> None:
    body = {**CONFIG, "trace_file_path": "traces/none.jsonl", "routes": {**ROUTES, **patch}}
    r = api.post("/v1/routes", json=body)
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(d["loc"][: len(loc)] == loc and words in d["msg"] for d in details), details


def test_simulated_routers_over_http_equal_the_cli(
    api: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """least_loaded and cache_aware: one simulation task per router x capacity over the pool lane
    (beside the state-free routers' lane tasks), the same bytes as the CLI."""
    trace = write_trace(tmp_path / "trace.jsonl", seed=29)
    uploaded = upload(api, trace.read_bytes(), "routes.jsonl")
    options = {**ROUTES, "routers": ["cache_aware", "round_robin", "least_loaded"], "balance_threshold": 0.25,
               "load_window_s": 2.5}  # fmt: skip
    r = api.post("/v1/routes", json={**CONFIG, "trace_id": uploaded["id"], "routes": options})
    assert r.status_code == 202, r.text
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    local = tmp_path / "config.json"
    local.write_text(json.dumps(config(trace, tmp_path / "unused", **CONFIG)))
    out = tmp_path / "cli" / "routes.json"
    argv = [*ROUTES_ARGV, "--routers", "cache_aware,round_robin,least_loaded", "--balance-threshold", "0.25",
            "--load-window-s", "2.5"]  # fmt: skip
    assert main(["routes", str(local), *argv, "-o", str(out)]) == 0, capsys.readouterr().err
    served = api.get(f"/v1/routes/{job['id']}/result")
    assert served.status_code == 200 and served.content == out.read_bytes()
    doc = json.loads(served.content)
    RoutesResult.model_validate(doc)
    assert [(e["router"], e["facts"] is None, e["curve"] is None) for e in doc["routers"]] == [
        ("cache_aware", True, True),
        ("round_robin", False, False),
        ("least_loaded", True, True),
    ]
    for entry in doc["routers"]:
        assert [at["capacity"] for at in entry["capacities"]] == ROUTES["capacities"]
        assert all(sum(p["requests"] for p in at["replicas"]) == 150 for at in entry["capacities"])
    parts = [(p["router"], p["replica"], p["capacity"], p["instance_id"]) for p in job["lanes"]]
    assert parts == [("round_robin", j, None, f"r{j}") for j in range(3)] + [
        (router, None, capacity, "pool")
        for router in ("cache_aware", "least_loaded")
        for capacity in ROUTES["capacities"]
    ]
    simulated = [p for p in job["lanes"] if p["capacity"] is not None]
    assert all(p["state"] == "succeeded" and p["requests"] == 150 for p in simulated)
    assert [p["simulated"]["hit_tokens"] for p in simulated] == [
        at["hit_tokens"] for e in (doc["routers"][0], doc["routers"][2]) for at in e["capacities"]
    ]
    # the SQL summary: one row per capacity x router, in the order asked
    assert [(row["capacity"], row["router"]) for row in job["summary"]] == [
        (capacity, router) for capacity in ROUTES["capacities"] for router in options["routers"]
    ]
    by_key = {(e["router"], at["capacity"]): at for e in doc["routers"] for at in e["capacities"]}
    for row in job["summary"]:
        at = by_key[(row["router"], row["capacity"])]
        assert row["hit_tokens"] == at["hit_tokens"] and row["input_tokens"] == at["input_tokens"]
        assert (
            row["max_over_mean"] == at["imbalance"]["max_over_mean"] and row["vs_round_robin"] == at["vs_round_robin"]
        )
    assert api.get(f"/v1/routes/{job['id']}/facts/cache_aware").status_code in (404, 422)
    assert api.get(f"/v1/routes/{job['id']}/facts/round_robin").status_code == 200
