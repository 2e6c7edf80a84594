"""Prometheus /metrics of the API, of an online owner and of a Celery worker: the text parses with
prometheus_client's own parser, and after known work every number is the exact count of it."""

from __future__ import annotations

import random
import tempfile
import urllib.error
import urllib.request
from collections import Counter as Tally
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery.states import FAILURE, RETRY, SUCCESS
from fastapi.testclient import TestClient
from helpers import group, instance
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from service_fixtures import ROOT, Workers, create_database, drop_database, free_port, wait_for
from sqlalchemy import select

from api.job_metrics import DURATION_BUCKETS
from api.main import create_app
from api.online import create_online_app
from litehit.db.migrate import upgrade
from litehit.db.models import Job, JobPart
from litehit.db.session import session_scope
from litehit.db.states import TERMINAL, JobState
from litehit.jobs.kinds import Kind
from litehit.jobs.replay import KIND as REPLAY
from litehit.settings import Settings
from worker.metrics import TASK_BUCKETS, TaskMetrics

PARSE_TASK, LANE_TASK, MERGE_TASK = REPLAY.task("parse"), REPLAY.part_task_name, REPLAY.task("merge")
FIRST_TASK = [k.value for k in Kind]  # every kind

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape by (name, labels); the parser rejects malformed text."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scraped: Samples, name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def family(scraped: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in scraped.items() if n == name}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(home=tmp_path, sweep_interval_s=0, online_snapshot_s=3600)
    upgrade(s.db_url)
    return s


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, enqueue=lambda *_: None)) as client:
        yield client


# The API: requests by route template and status


def test_api_counts_requests_by_route_template_and_status(api: TestClient, settings: Settings) -> None:
    ids = [f"id{i:04d}" for i in range(3)]
    for job_id in ids:
        assert api.get(f"/v1/replays/{job_id}").status_code == 404
    for _ in range(2):
        assert api.get("/healthz").status_code == 200
    assert api.get("/v1/traces?limit=1").status_code == 200
    assert api.get("/v1/traces?limit=0").status_code == 422
    assert api.get("/no/such/route").status_code == 404
    too_big = b"x" * (settings.max_body_bytes + 1)
    assert api.post("/v1/replays", content=too_big, headers={"Content-Type": "application/json"}).status_code == 413
    assert api.request("BREW", "/healthz").status_code == 405  # an unknown method: one label for all
    first = api.get("/metrics")
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/plain")
    scraped = samples(api.get("/metrics").text)
    requests = family(scraped, "litehit_http_requests_total")
    assert requests == {
        frozenset({"method": "GET", "route": "/v1/replays/{job_id}", "status": "404"}.items()): 3,
        frozenset({"method": "GET", "route": "/healthz", "status": "200"}.items()): 2,
        frozenset({"method": "GET", "route": "/v1/traces", "status": "200"}.items()): 1,
        frozenset({"method": "GET", "route": "/v1/traces", "status": "422"}.items()): 1,
        frozenset({"method": "GET", "route": "unmatched", "status": "404"}.items()): 1,
        frozenset({"method": "POST", "route": "unmatched", "status": "413"}.items()): 1,  # refused before routing
        frozenset({"method": "GET", "route": "/metrics", "status": "200"}.items()): 1,  # the first scrape
        frozenset({"method": "other", "route": "/healthz", "status": "405"}.items()): 1,
    }
    assert not any(job_id in first.text for job_id in ids)  # no ids in labels
    counts = family(scraped, "litehit_http_request_duration_seconds_count")
    assert counts[frozenset({"method": "GET", "route": "/v1/replays/{job_id}"}.items())] == 3
    assert counts[frozenset({"method": "GET", "route": "/v1/traces"}.items())] == 2
    inf = value(scraped, "litehit_http_request_duration_seconds_bucket", method="GET", route="/healthz", le="+Inf")
    assert inf == 2
    assert value(scraped, "litehit_database_up") == 1


def test_metrics_need_the_token_when_one_is_set(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, sweep_interval_s=0, api_token="s3cret")
    upgrade(s.db_url)
    with TestClient(create_app(s, enqueue=lambda *_: None)) as api:
        assert api.get("/metrics").status_code == 401
        assert api.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert api.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    with TestClient(create_online_app(s)) as owner:
        assert owner.get("/metrics").status_code == 401
        assert owner.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


# The API: jobs by kind and state, durations of ended jobs


def add_jobs(db_url: str, seed: int) -> list[tuple[str, str, float | None]]:
    """Random job rows; an ended one took a whole number of quarter seconds (exact in binary and
    in milliseconds) between 0.25 s and 30 000 s, none on a bucket bound. Returns (kind, state,
    duration or None)."""
    rng = random.Random(seed)
    kinds = [*FIRST_TASK, "cli_only_kind"]
    base = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    rows = []
    with session_scope(db_url) as session:
        for i in range(120):
            kind, state = rng.choice(kinds), rng.choice(list(JobState))
            created = base + timedelta(seconds=i)
            seconds = None
            finished = None
            if state in TERMINAL:
                seconds = rng.choice([rng.randrange(1, 4), rng.randrange(5, 400), rng.randrange(400, 120_000)]) / 4
                seconds += 0.25 if seconds in DURATION_BUCKETS else 0
                finished = created + timedelta(seconds=seconds)
            session.add(Job(kind=kind, state=state, spec={}, created_at=created, finished_at=finished))
            rows.append((kind, str(state), seconds))
    return rows


def check_job_metrics(scraped: Samples, db_url: str) -> None:
    """litehit_jobs and litehit_job_duration_seconds equal a naive count of the rows."""
    with session_scope(db_url) as session:
        jobs = session.scalars(select(Job)).all()
        naive = Tally((j.kind, str(j.state)) for j in jobs)
        ended: dict[tuple[str, str], list[float]] = {}
        for j in jobs:
            if j.state in TERMINAL and j.finished_at is not None:
                ended.setdefault((j.kind, str(j.state)), []).append((j.finished_at - j.created_at).total_seconds())
    kinds = set(FIRST_TASK) | {k for k, _ in naive}
    assert family(scraped, "litehit_jobs") == {
        frozenset({"kind": k, "state": s.value}.items()): naive[(k, s.value)] for k in kinds for s in JobState
    }
    assert {
        (dict(labels)["kind"], dict(labels)["state"])
        for labels in family(scraped, "litehit_job_duration_seconds_count")
    } == set(ended)
    for (kind, state), durations in ended.items():
        labels = {"kind": kind, "state": state}
        assert value(scraped, "litehit_job_duration_seconds_count", **labels) == len(durations)
        assert value(scraped, "litehit_job_duration_seconds_sum", **labels) == sum(durations)
        for bound in DURATION_BUCKETS:
            expected = sum(1 for d in durations if d <= bound)
            assert value(scraped, "litehit_job_duration_seconds_bucket", **labels, le=f"{bound}") == expected
        assert value(scraped, "litehit_job_duration_seconds_bucket", **labels, le="+Inf") == len(durations)


def test_jobs_by_kind_and_state_equal_a_naive_count(api: TestClient, settings: Settings) -> None:
    empty = samples(api.get("/metrics").text)
    assert set(family(empty, "litehit_jobs").values()) == {0} and not family(
        empty, "litehit_job_duration_seconds_count"
    )
    rows = add_jobs(settings.db_url, seed=1)
    assert len({(k, s) for k, s, _ in rows}) > 20 and any(d is not None and d > 3600 for _, _, d in rows)
    check_job_metrics(samples(api.get("/metrics").text), settings.db_url)


@pytest.mark.service
def test_jobs_by_kind_and_state_on_postgresql(tmp_path: Path) -> None:
    name, url = create_database()
    try:
        upgrade(url)
        s = Settings(home=tmp_path, database_url=url, sweep_interval_s=0)
        add_jobs(url, seed=2)
        with TestClient(create_app(s, enqueue=lambda *_: None)) as api:
            check_job_metrics(samples(api.get("/metrics").text), url)
    finally:
        drop_database(name)


def test_the_scrape_survives_an_unreachable_database(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, sweep_interval_s=0, database_url="postgresql://nobody@127.0.0.1:1/none")
    with TestClient(create_app(s, enqueue=lambda *_: None)) as api:
        scraped = samples(api.get("/metrics").text)
    assert value(scraped, "litehit_database_up") == 0 and not family(scraped, "litehit_jobs")


# An online owner: per instance and capacity slot


def test_online_owner_reports_what_its_trace_queries_returned(settings: Settings) -> None:
    caps = [1.0, 2 * 16384 / (1 << 30)]  # 1 GiB and 2 blocks of 16 KiB
    rng = random.Random(5)
    with TestClient(create_online_app(settings)) as owner:
        assert owner.post("/v1/online/groups", json=group("g1", capacity_gb=caps)).status_code == 201
        assert owner.post("/v1/online/groups", json=group("g2", enable_theoretical_max_cache=True)).status_code == 201
        assert owner.post("/v1/online/instances", json=instance("a", 4, group="g1")).status_code == 201
        assert owner.post("/v1/online/instances", json=instance("b", 8, group="g2")).status_code == 201
        results: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for i in range(40):
            inst = "ab"[i % 2]
            keys = [rng.randrange(6) for _ in range(rng.randint(1, 5))]
            body = {"block_keys": keys, "input_token_len": len(keys) * (4 if inst == "a" else 8) + rng.randrange(3)}
            url = f"/v1/online/instances/{inst}/trace-queries"
            if i % 5:
                results[inst].append(owner.post(url, json=body).json())
            else:
                results[inst] += owner.post(f"{url}/batch", json={"requests": [body, body]}).json()["results"]
        scraped = samples(owner.get("/metrics").text)
        views = {v["instance_id"]: v for v in owner.get("/v1/online/instances").json()["items"]}
    for inst, grp, block_size, slots in [("a", "g1", 4, sorted(caps)), ("b", "g2", 8, [1.0])]:
        answers = results[inst]
        tokens = sum(r["input_token_len"] for r in answers)
        labels = {"instance": inst, "group": grp}
        assert value(scraped, "litehit_online_input_tokens_total", **labels) == tokens
        assert value(scraped, "litehit_online_queries_total", **labels) == len(answers)
        for i, gb in enumerate(slots):
            hit_tokens = sum(r["hit_blocks"][i] for r in answers) * block_size
            slot = {**labels, "slot": str(i), "capacity_gb": repr(gb)}
            assert value(scraped, "litehit_online_hit_tokens_total", **slot) == hit_tokens
            assert value(scraped, "litehit_online_hit_rate", **slot) == hit_tokens / tokens
        mem = value(scraped, "litehit_online_engine_memory_bytes", **labels)
        assert mem == views[inst]["engine_memory_bytes"] > 0
    max_slot = {"instance": "b", "group": "g2", "slot": "max", "capacity_gb": "+Inf"}
    max_tokens = sum(r["max_hit_blocks"] for r in results["b"]) * 8
    assert value(scraped, "litehit_online_hit_tokens_total", **max_slot) == max_tokens > 0
    assert not any(dict(k).get("slot") == "max" and dict(k)["instance"] == "a" for (_, k) in scraped)
    assert value(scraped, "litehit_online_instances") == 2
    assert value(scraped, "litehit_online_shard_owned", shard="0") == 1
    route = {"method": "POST", "route": "/v1/online/instances/{instance_id}/trace-queries", "status": "200"}
    assert value(scraped, "litehit_http_requests_total", **route) == 32  # 40 requests, every fifth a batch


# The worker: the signal hooks, then a real worker process


class FakeTask:
    def __init__(self, name: str) -> None:
        self.name = name


def test_worker_signal_hooks_count_tasks_durations_and_lane_blocks() -> None:
    registry = CollectorRegistry()
    ticks = iter([10.0, 10.5, 20.0, 23.0, 30.0, 30.25, 40.0, 100.0])
    lanes = {("job1", 0): 1234, ("job1", 1): 766, ("job2", 0): 10, ("job2", 2): 20, ("job2", 3): 30}
    metrics = TaskMetrics(registry, lane_blocks=lambda job, lane: lanes[(job, lane)], clock=lambda: next(ticks))
    parse, lane = FakeTask(PARSE_TASK), FakeTask(LANE_TASK)
    metrics.on_prerun(task_id="t1", task=parse)
    metrics.on_postrun(task_id="t1", task=parse, state=SUCCESS, retval="parsed", args=("job1",))
    metrics.on_prerun(task_id="t2", task=lane)
    metrics.on_postrun(task_id="t2", task=lane, state=SUCCESS, retval="succeeded", args=("job1", 0))
    metrics.on_prerun(task_id="t3", task=lane)  # a transient error: retried ...
    metrics.on_retry(sender=lane, request=None, reason=None)
    metrics.on_postrun(task_id="t3", task=lane, state=RETRY, retval=None, args=("job1", 1))
    metrics.on_prerun(task_id="t3", task=lane)  # ... then it fails for good
    metrics.on_failure(sender=lane, task_id="t3", exception=RuntimeError("x"))
    metrics.on_postrun(task_id="t3", task=lane, state=FAILURE, retval=None, args=("job1", 1))
    metrics.on_postrun(task_id="t9", task=lane, state=SUCCESS, retval="skipped", args=("job1", 1))  # no prerun seen
    took = "succeeded with parts 2 3"  # a lane that took lanes of its unit along (a shared lane core)
    metrics.on_postrun(task_id="t10", task=lane, state=SUCCESS, retval=took, args=("job2", 0))
    scraped = samples(generate_latest(registry).decode())
    assert family(scraped, "litehit_celery_tasks_total") == {
        frozenset({"task": PARSE_TASK, "state": "started"}.items()): 1,
        frozenset({"task": PARSE_TASK, "state": "success"}.items()): 1,
        frozenset({"task": LANE_TASK, "state": "started"}.items()): 3,
        frozenset({"task": LANE_TASK, "state": "success"}.items()): 3,
        frozenset({"task": LANE_TASK, "state": "retry"}.items()): 1,
        frozenset({"task": LANE_TASK, "state": "failure"}.items()): 1,
    }
    assert value(scraped, "litehit_replay_lane_blocks_total") == 1234 + 10 + 20 + 30  # the lanes that succeeded
    assert value(scraped, "litehit_celery_task_duration_seconds_count", task=PARSE_TASK) == 1
    assert value(scraped, "litehit_celery_task_duration_seconds_sum", task=PARSE_TASK) == 0.5
    assert value(scraped, "litehit_celery_task_duration_seconds_count", task=LANE_TASK) == 3
    assert value(scraped, "litehit_celery_task_duration_seconds_sum", task=LANE_TASK) == 3.0 + 0.25 + 60.0
    assert value(scraped, "litehit_celery_task_duration_seconds_bucket", task=LANE_TASK, le="1.0") == 1
    assert value(scraped, "litehit_celery_task_duration_seconds_bucket", task=LANE_TASK, le="5.0") == 2
    assert len(TASK_BUCKETS) + 1 == len(
        [k for k in family(scraped, "litehit_celery_task_duration_seconds_bucket") if dict(k)["task"] == LANE_TASK]
    )


def scrape(url: str, token: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=5) as answer:
        text: str = answer.read().decode()
        return text


@pytest.mark.service
def test_a_real_worker_sums_its_pool_processes(service_settings: Settings, tmp_path: Path, data_dir: Path) -> None:
    """A prefork worker of its own (queue, metrics port, token): a replay's tasks run in its child
    processes, its main process serves their sum."""
    port = free_port()
    settings = service_settings.model_copy(  # no sweep: no other test's job reaches this queue
        update={
            "worker_metrics_port": port,
            "queue": f"{service_settings.queue}-metrics",
            "api_token": "t0ken",
            "sweep_interval_s": 0,
        }
    )
    workers = Workers(settings, tmp_path / "worker.log")
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for(lambda: b" ready." in (tmp_path / "worker.log").read_bytes(), 60, "the Celery worker to start")
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(url)
        assert refused.value.code == 401
        before = samples(scrape(url, "t0ken"))
        assert not family(before, "litehit_celery_tasks_total")
        with TestClient(create_app(settings), headers={"Authorization": "Bearer t0ken"}) as api:
            trace = api.post(
                "/v1/traces?name=t.jsonl", content=(data_dir / "conversation_trace.jsonl").read_bytes()
            ).json()
            config = {
                "trace_id": trace["id"],
                "block_size": 512,
                "fanout_all_instances": True,
                "instance_groups": [{"name": "g"}],
                "instances": [
                    instance("b512", 512, group="g", sizes=(1 << 20,)),
                    instance("b1024", 1024, group="g", sizes=(1 << 21,)),
                ],
            }
            submitted = api.post("/v1/replays", json=config)
            assert submitted.status_code == 202, submitted.text
            job = wait_for(
                lambda: (b := api.get(submitted.headers["location"]).json())["state"] in ("succeeded", "failed") and b,
                120,
                "the replay",
            )
        assert job["state"] == "succeeded", job["error"]
        blocks = sum(lane["blocks"] for lane in job["lanes"])
        with session_scope(settings.db_url) as session:
            parts = session.scalars(select(JobPart).where(JobPart.job_id == job["id"]))
            assert blocks == sum(r.result["blocks"] for r in parts)

        runs = [(PARSE_TASK, 1), (LANE_TASK, 2), (MERGE_TASK, 1)]

        def ended() -> Samples | None:  # a task's postrun may follow its commit by a moment
            got = samples(scrape(url, "t0ken"))
            done = all(value(got, "litehit_celery_tasks_total", task=t, state="success") >= n for t, n in runs)
            return got if done else None

        scraped = wait_for(ended, 30, "every task's postrun")
        assert family(scraped, "litehit_celery_tasks_total") == {
            frozenset({"task": task, "state": state}.items()): n for task, n in runs for state in ("started", "success")
        }
        for task, n in runs:
            assert value(scraped, "litehit_celery_task_duration_seconds_count", task=task) == n
        assert value(scraped, "litehit_replay_lane_blocks_total") == blocks > 0
        (directory,) = Path(tempfile.gettempdir()).glob(f"litehit-worker-metrics-{workers.proc.pid}-*")
        pids = {int(f.stem.rsplit("_", 1)[1]) for f in directory.glob("*.db")}
        assert pids - {workers.proc.pid}  # counted in the pool's children, served by the main process
    finally:
        workers.stop()
    assert not list(
        Path(tempfile.gettempdir()).glob(f"litehit-worker-metrics-{workers.proc.pid}-*")
    )  # removed at shutdown


# The compose stack's Prometheus


def test_prometheus_of_the_stack_scrapes_every_service() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    prometheus = services["prometheus"]
    assert prometheus["profiles"] == ["metrics"]
    assert prometheus["image"] == "${LITEHIT_PROMETHEUS_IMAGE:-prom/prometheus:v3.4.2}"
    assert "./deploy/prometheus.yml:/etc/prometheus/litehit.yml:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/litehit.yml" in prometheus["entrypoint"][-1]
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    token_file = "/prometheus/litehit-token"
    assert f"> {token_file}" in prometheus["entrypoint"][-1]
    assert all(job["authorization"] == {"credentials_file": token_file} for job in jobs.values())
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs.values())
    api_port = services["api"]["command"][services["api"]["command"].index("--port") + 1]
    online_port = services["online"]["command"][services["online"]["command"].index("--port") + 1]
    assert jobs["litehit-api"]["static_configs"] == [{"targets": [f"api:{api_port}"]}]
    assert jobs["litehit-online"]["static_configs"] == [{"targets": [f"online:{online_port}"]}]
    worker = services["worker"]
    port = worker["environment"]["LITEHIT_WORKER_METRICS_PORT"]
    assert jobs["litehit-worker"]["dns_sd_configs"] == [
        {"names": ["worker"], "type": "A", "port": int(port), "refresh_interval": "30s"}
    ]
    assert worker["expose"] == [port] and "ports" not in worker  # `--scale worker=N` still works
    assert services["api"]["environment"]["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")  # 2 uvicorn processes
