"""What the two owner apps share (the online owner, api/online.py, and the attribution owner,
api/attribution.py): an owner built at startup that claims its shard's lease (waiting, in a
thread, for a dead owner's lease to expire), starts, renews the lease in the background and does
its own housekeeping (on the event loop, and what of it may run off the loop in a thread), and
releases everything at shutdown; plus the same error
handlers, offline docs, body limit and Prometheus metrics on every owner app."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Protocol

import anyio
from fastapi import APIRouter, FastAPI
from prometheus_client.registry import Collector

from api.body_limit import BodyLimit
from api.docs import install_docs
from api.errors import install_error_handlers
from api.json_text import LoneSurrogates
from api.metrics import AppMetrics, RequestMetrics, metrics_router
from litehit.settings import Settings

__all__ = ["Owner", "create_owner_app"]


class Owner(Protocol):
    @property
    def housekeeping_s(self) -> float: ...

    def claim(self) -> None: ...

    def start(self) -> None: ...

    def renew(self) -> bool: ...

    def housekeep(self) -> None: ...

    def housekeep_in_thread(self) -> None: ...

    def release(self) -> None: ...


async def _housekeeping(owner: Owner, log: logging.Logger) -> None:
    """Renews the lease (in a thread), then the owner's own housekeeping: on the event loop, where
    its state is touched, and what of it is safe and long enough to go in a thread there."""
    while True:
        await asyncio.sleep(owner.housekeeping_s)
        try:
            await anyio.to_thread.run_sync(owner.renew)
            owner.housekeep()
            await anyio.to_thread.run_sync(owner.housekeep_in_thread)
        except Exception as exc:  # database briefly down: next round
            log.warning("housekeeping failed: %s", exc)


def create_owner_app(
    title: str,
    settings: Settings,
    make_owner: Callable[[Settings], Owner],
    routers: Iterable[APIRouter],
    collectors: Callable[[FastAPI], Iterable[Collector]],
    log: logging.Logger,
) -> FastAPI:
    """The app of one shard's owner: ``app.state.owner`` while it serves. ``collectors`` gives the
    app's Prometheus collectors (they read ``app.state.owner`` at scrape time)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owner = make_owner(settings)
        await anyio.to_thread.run_sync(owner.claim)  # may wait for a dead owner's lease to expire
        try:
            owner.start()
            app.state.owner = owner
            task = asyncio.create_task(_housekeeping(owner, log))
            gc.freeze()  # the owner's long-lived state never becomes garbage
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            owner.release()

    app = FastAPI(title=title, version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    install_error_handlers(app)
    install_docs(app)
    app.add_middleware(LoneSurrogates)  # inside the body limit: it reads bounded bodies only
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.state.metrics = metrics = AppMetrics(collectors(app))
    app.add_middleware(RequestMetrics, metrics=metrics)
    for router in routers:
        app.include_router(router)
    app.include_router(metrics_router(metrics, reads_database=False))  # the owner's state, on its event loop
    return app
