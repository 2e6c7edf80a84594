"""The LiteHit HTTP API: ``uvicorn api.main:app`` (OpenAPI docs at /docs and /redoc, offline).

Layers point one way: api -> worker (the Celery app, to send tasks by name) -> litehit (job
kinds, submission, recovery, models, settings) -> core_c. The API never runs a job itself and
loads no C engine, numpy or matplotlib: it commits job rows and enqueues tasks by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import APIRouter, Depends, FastAPI

from api.body_limit import BodyLimit
from api.deps import Admission, require_token
from api.docs import install_docs
from api.errors import install_error_handlers
from api.forwarding import Forwarder
from api.job_metrics import JobCollector
from api.json_text import LoneSurrogates
from api.metrics import AppMetrics, RequestMetrics, metrics_router
from api.routes import attribution, health, jobs, online, traces
from litehit.db.session import session_scope
from litehit.jobs.recovery import sweep
from litehit.settings import Settings, get_settings
from litehit.storage import Storage
from worker.celery_app import make_sender

__all__ = ["create_app"]  # and ``app``, built on first access (see __getattr__)

log = logging.getLogger("litehit.api")


async def _sweeper(settings: Settings, enqueue: Callable[..., None]) -> None:
    """Hands lost work out again (see litehit.jobs.recovery), every sweep_interval_s."""

    def once() -> list[str]:
        with session_scope(settings.db_url) as session:
            return sweep(session, settings, enqueue)

    while True:
        try:
            for action in await anyio.to_thread.run_sync(once):
                log.info("sweep: %s", action)
        except Exception as exc:  # database briefly down: next round
            log.warning("sweep failed: %s", exc)
        await asyncio.sleep(settings.sweep_interval_s)


def create_app(settings: Settings | None = None, *, enqueue: Callable[..., None] | None = None) -> FastAPI:
    settings = settings or get_settings()
    send = enqueue or make_sender(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = Storage(settings.storage)
        storage.ensure()
        for path in await anyio.to_thread.run_sync(storage.remove_orphan_parts, settings.upload_part_grace_s):
            log.info("removed the unfinished upload %s", path)
        # As many request threads as database connections: no thread waits for a connection,
        # and fewer threads contend for the GIL under load.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.db_pool_size
        app.state.admission = Admission(settings)  # job submissions beyond its limit get 503 + Retry-After
        # The app's long-lived objects never become garbage: keep the collector from rescanning
        # them, which would otherwise show up as latency spikes.
        gc.freeze()
        task = asyncio.create_task(_sweeper(settings, send)) if settings.sweep_interval_s > 0 else None
        app.state.forwarder = Forwarder(settings)  # to the owners: pooled, bounded (503 beyond)
        yield
        await app.state.forwarder.aclose()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(
        title="LiteHit",
        version="0.1.0",
        summary="Exact KV-cache prefix hit rates at any capacity, from one replay of a block trace.",
        lifespan=lifespan,
        docs_url=None,  # served offline by install_docs
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.enqueue = send
    install_error_handlers(app)
    install_docs(app)
    app.add_middleware(LoneSurrogates, exempt=_is_upload)  # inside the body limit: bounded bodies only
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, exempt=_is_upload)
    app.state.metrics = metrics = AppMetrics([JobCollector(settings.db_url)])
    app.add_middleware(RequestMetrics, metrics=metrics)  # outermost: 413s counted too
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
    v1.include_router(traces.router)
    for router in jobs.routers():  # one resource per job kind (litehit.jobs.registry)
        v1.include_router(router)
    for module in (online, attribution):
        v1.include_router(module.router)
    app.include_router(v1)
    app.include_router(health.router)
    app.include_router(metrics_router(metrics, reads_database=True))
    return app


def _is_upload(scope: Any) -> bool:
    """Trace uploads stream to disk under their own limit (LITEHIT_MAX_UPLOAD_BYTES)."""
    return bool(scope["method"] == "POST" and scope["path"].rstrip("/") == "/v1/traces")


def __getattr__(name: str) -> Any:  # ``uvicorn api.main:app`` builds the app on first use
    if name == "app":
        globals()["app"] = application = create_app()
        return application
    raise AttributeError(name)
