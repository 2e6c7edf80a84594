"""Prometheus metrics of a Celery worker, served by its main process on LITEHIT_WORKER_METRICS_PORT
(0, the default: none of this runs):

- ``litehit_celery_tasks_total{task, state}``: task runs by task name and Celery state: ``started``
  when one begins (task_prerun), then exactly one of ``failure`` (task_failure), ``retry``
  (task_retry) or the state it ended in otherwise (task_postrun: ``success``, ``ignored``, ...);
- ``litehit_celery_task_duration_seconds{task}``: each run's time, task_prerun to task_postrun;
- ``litehit_replay_lane_blocks_total``: blocks replayed by the replay lanes that succeeded here (as
  their lane row records them). Lane throughput in blocks per second of lane work is its rate over
  ``rate(litehit_celery_task_duration_seconds_sum{task="litehit.replay.lane"})``.

Tasks run in the prefork pool's child processes, so the counts live in prometheus_client's
multiprocess mode: at worker start the main process creates a private, empty directory, points
PROMETHEUS_MULTIPROC_DIR at it (the children inherit it when they fork), and serves the sum of
every process's files there, children that have exited included, so counters never go back when
the pool replaces a child. Each child that ran a task leaves its files, so they grow with the
children the pool has replaced (worker_max_tasks_per_child) until the worker restarts; the
directory is removed at a clean shutdown.
"""

from __future__ import annotations

import hmac
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from celery import signals
from celery.states import FAILURE, RETRY
from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app, values
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy.exc import SQLAlchemyError

from litehit.db.models import JobPart
from litehit.db.session import session_scope
from litehit.jobs.replay import KIND as REPLAY
from litehit.jobs.state import parts_done
from litehit.settings import Settings

__all__ = ["TASK_BUCKETS", "MetricsServer", "TaskMetrics", "replay_lane_blocks", "serve_worker_metrics"]

log = logging.getLogger("litehit.worker")

TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 18000.0)
"""Upper bounds (seconds) of the task duration histogram; +Inf is added."""

LaneBlocks = Callable[[str, int], "int | None"]
"""(job id, lane) -> the blocks its lane row records (None: no such row)."""


def replay_lane_blocks(job_id: str, lane: int) -> int | None:
    with session_scope() as session:
        row = session.get(JobPart, (job_id, lane))
        if row is None:
            return None
        blocks = (row.result or row.progress or {}).get("blocks")
        return int(blocks) if isinstance(blocks, int) else None


class TaskMetrics:
    """The worker's metrics and the Celery signal hooks that count them. `registry` None: the
    metrics are registered nowhere (multiprocess mode serves them from their files)."""

    def __init__(
        self,
        registry: CollectorRegistry | None,
        *,
        lane_blocks: LaneBlocks = replay_lane_blocks,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.lane_blocks, self.clock = lane_blocks, clock
        self.tasks = Counter(
            "litehit_celery_tasks", "Celery task runs by task name and state", ["task", "state"], registry=registry
        )
        self.duration = Histogram(
            "litehit_celery_task_duration_seconds",
            "Time of a Celery task run, from task_prerun to task_postrun",
            ["task"],
            buckets=TASK_BUCKETS,
            registry=registry,
        )
        self.replay_lane_blocks = Counter(
            "litehit_replay_lane_blocks", "Blocks replayed by the replay lanes that succeeded", registry=registry
        )
        self._started: dict[str, float] = {}  # task id -> clock() at task_prerun, in this process

    def on_prerun(self, task_id: str, task: Any, **_: Any) -> None:
        self._started[task_id] = self.clock()
        self.tasks.labels(task.name, "started").inc()

    def on_postrun(
        self, task_id: str, task: Any, state: str | None = None, retval: Any = None, args: Any = (), **_: Any
    ) -> None:
        started = self._started.pop(task_id, None)
        if started is not None:
            self.duration.labels(task.name).observe(self.clock() - started)
        if state not in (FAILURE, RETRY):  # those are counted by their own signals
            self.tasks.labels(task.name, (state or "unknown").lower()).inc()
        if task.name == REPLAY.part_task_name and len(args) == 2:
            for lane in parts_done(retval, args[1]):  # the lanes its unit took along too
                self._count_lane(args[0], lane)

    def on_failure(self, sender: Any, **_: Any) -> None:
        self.tasks.labels(sender.name, FAILURE.lower()).inc()

    def on_retry(self, sender: Any, **_: Any) -> None:
        self.tasks.labels(sender.name, RETRY.lower()).inc()

    def _count_lane(self, job_id: str, lane: int) -> None:
        try:
            blocks = self.lane_blocks(job_id, lane)
        except SQLAlchemyError as exc:  # the database went away after the lane was recorded
            log.warning("metrics: could not read the blocks of lane %s/%s: %s", job_id, lane, exc)
            return
        if blocks:
            self.replay_lane_blocks.inc(blocks)

    def connect(self) -> None:
        """Hooks the metrics to Celery's signals (strong references: the hooks live as long as
        the worker)."""
        signals.task_prerun.connect(self.on_prerun, weak=False)
        signals.task_postrun.connect(self.on_postrun, weak=False)
        signals.task_failure.connect(self.on_failure, weak=False)
        signals.task_retry.connect(self.on_retry, weak=False)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def metrics_wsgi_app(registry: CollectorRegistry, token: str | None) -> Callable[..., Iterable[bytes]]:
    """The text format of `registry` at any path; with a token, only for ``Authorization: Bearer
    <token>`` (as the API's /metrics)."""
    inner = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        scheme, _, given = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
        if token and (scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode())):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
            return [b"a valid bearer token is required\n"]
        result: Iterable[bytes] = inner(environ, start_response)
        return result

    return app


@dataclass
class MetricsServer:
    """The main process's exposition server and the directory of the processes' metric files."""

    server: WSGIServer
    directory: str
    metrics: TaskMetrics

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)


def serve_worker_metrics(settings: Settings) -> MetricsServer:
    """Multiprocess mode in a fresh private directory, the signal hooks, and the exposition server
    on all interfaces. Call it in the worker's main process before the pool starts (celeryd_init)."""
    directory = tempfile.mkdtemp(prefix=f"litehit-worker-metrics-{os.getpid()}-")
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    app = metrics_wsgi_app(registry, settings.api_token)
    try:  # a port in use: logged by Celery, and the worker runs without metrics
        server = make_server("", settings.worker_metrics_port, app, _Server, handler_class=_QuietHandler)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    # prometheus_client picks where values live when it is imported, before this ran: pick again
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    metrics = TaskMetrics(None)
    metrics.connect()
    threading.Thread(target=server.serve_forever, name="litehit-metrics", daemon=True).start()
    log.info("worker metrics on port %d (/metrics), process files in %s", server.server_port, directory)
    return MetricsServer(server, directory, metrics)
