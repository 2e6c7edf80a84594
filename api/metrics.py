"""Prometheus metrics of an HTTP app (the API, an online owner): requests and their latency by
route template, plus the app's own collectors, served at ``GET /metrics``.

Each app has its own CollectorRegistry, so several apps in one process (tests) never share a
metric. An app served by several processes (``uvicorn --workers N``, the API in compose) sets
PROMETHEUS_MULTIPROC_DIR: prometheus_client then keeps every process's counters in a file there,
and each scrape sums the files of every process, whichever process answers it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import require_token

__all__ = ["METHODS", "UNMATCHED", "AppMetrics", "RequestMetrics", "metrics_router", "route_template"]

UNMATCHED = "unmatched"
"""The route label of a request that matched no route (a template always starts with "/")."""

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Methods labelled as themselves; any other is ``other`` (clients cannot mint new series)."""


class AppMetrics:
    """The metrics of one app: the request counter and latency histogram in a private registry,
    and the app's collectors, read at scrape time."""

    def __init__(self, collectors: Iterable[Collector] = ()) -> None:
        self.registry = CollectorRegistry()
        self.collectors = list(collectors)
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory:  # its files are created with the first request
            os.makedirs(directory, exist_ok=True)
        self.requests = Counter(
            "litehit_http_requests",
            "HTTP requests answered, by method, route template and status code",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "litehit_http_request_duration_seconds",
            "Time from receiving an HTTP request to the end of its answer, by method and route template",
            ["method", "route"],
            registry=self.registry,
        )
        for collector in self.collectors:
            self.registry.register(collector)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in METHODS else "other"
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def exposition(self) -> bytes:
        """The text format of every metric (summed over the processes of a multiprocess app)."""
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not directory:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=directory)  # type: ignore[no-untyped-call]
        for collector in self.collectors:
            merged.register(collector)
        return generate_latest(merged)


class RequestMetrics:
    """ASGI middleware counting every HTTP request by its route template (``/v1/replays/{job_id}``,
    never the raw path: ids stay out of the labels) and status, and timing it. A request answered
    before routing (a body over the limit) or matching no route is labelled ``unmatched``."""

    def __init__(self, app: ASGIApp, metrics: AppMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception before the answer started: the server answers 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.observe(scope["method"], route_template(scope), status, time.perf_counter() - start)


def route_template(scope: Scope) -> str:
    """The template of the route that answered: the route's own template (``/replays/{job_id}``)
    behind the prefixes of the routers that include it, which are read off the request's path
    (they have no parameters)."""
    route: Any = scope.get("route")
    path_format = getattr(route, "path_format", None)
    if not isinstance(path_format, str):
        return UNMATCHED
    convertors = getattr(route, "param_convertors", {})
    params = {
        name: convertors[name].to_string(value) if name in convertors else str(value)
        for name, value in scope.get("path_params", {}).items()
    }
    try:
        concrete = path_format.format(**params)
    except (KeyError, IndexError, ValueError):
        return path_format
    path = str(scope.get("path", ""))
    return path[: len(path) - len(concrete)] + path_format if path.endswith(concrete) else path_format


def metrics_router(metrics: AppMetrics, *, reads_database: bool) -> APIRouter:
    """``GET /metrics`` (outside /v1; the bearer token when LITEHIT_API_TOKEN is set). Collectors
    that read SQL run in the thread pool (`reads_database`); the others on the event loop, where
    an online owner's live state may be read (only that thread touches its cores)."""
    router = APIRouter(tags=["metrics"], dependencies=[Depends(require_token)])
    summary = "Prometheus metrics (text format)"
    if reads_database:

        @router.get("/metrics", summary=summary, response_class=Response)
        def scrape() -> Response:
            return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    else:

        @router.get("/metrics", summary=summary, response_class=Response)
        async def scrape_inline() -> Response:
            return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return router
