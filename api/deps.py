"""Dependencies of the routes: settings, database session, storage, auth, the enqueuer and the
admission of job submissions.

They are ``async`` although they do no I/O: FastAPI then calls them on the event loop instead
of handing each one to the thread pool, which matters at hundreds of requests per second."""

from __future__ import annotations

import functools
import hmac
import math
import os
from collections.abc import AsyncIterator
from typing import Annotated

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from api.errors import ApiError
from litehit.db.session import get_engine
from litehit.jobs.submit import Enqueue
from litehit.settings import Settings
from litehit.storage import Storage


async def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


@functools.cache
def _sessions(url: str, pid: int, read_only: bool) -> sessionmaker[Session]:
    engine = get_engine(url)
    if read_only:
        engine = engine.execution_options(isolation_level="AUTOCOMMIT")
    return sessionmaker(engine, expire_on_commit=False)


async def get_session(request: Request, settings: SettingsDep) -> AsyncIterator[Session]:
    """A session per request. GET requests only read: their connection runs in autocommit
    mode, which saves the BEGIN/ROLLBACK round trips of a transaction."""
    session = _sessions(settings.db_url, os.getpid(), request.method == "GET")()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def get_storage(settings: SettingsDep) -> Storage:
    return Storage(settings.storage)


StorageDep = Annotated[Storage, Depends(get_storage)]


async def get_enqueue(request: Request) -> Enqueue:
    enqueue: Enqueue = request.app.state.enqueue
    return enqueue


EnqueueDep = Annotated[Enqueue, Depends(get_enqueue)]


bearer = HTTPBearer(
    auto_error=False,  # a missing token is answered below, in the API's error shape
    scheme_name="bearer",
    description="LITEHIT_API_TOKEN: needed by every /v1 route when the server sets it",
)
"""The OpenAPI security scheme of the token (the Authorize button of /docs)."""


async def require_token(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    """When LITEHIT_API_TOKEN is set, every /v1 route needs ``Authorization: Bearer <token>``."""
    if not settings.api_token:
        return
    token = credentials.credentials if credentials is not None else ""
    if not token or not hmac.compare_digest(token.encode(), settings.api_token.encode()):
        raise ApiError(401, "unauthorized", "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})


class Admission:
    """At most `limit` job submissions of this process run at once (never more than the database
    pool holds); one that finds no free slot within `wait_s` is refused at once with 503 and
    Retry-After. Waiting happens on the event loop, holding neither a request thread nor a
    database connection. Without it, a burst on a cold API queued every submission for the
    request threads while the finished ones held the pooled connections waiting for a thread
    to serialize their answer: 500s (pool timeout) and client timeouts."""

    def __init__(self, settings: Settings) -> None:
        self.limit = max(1, min(settings.admission_limit, settings.db_pool_size))
        self.wait_s = settings.admission_wait_s
        self.retry_after_s = max(1, math.ceil(settings.admission_wait_s))
        self._slots = anyio.Semaphore(self.limit)  # create inside the app's event loop (lifespan)

    async def __aenter__(self) -> None:
        try:
            self._slots.acquire_nowait()
            return
        except anyio.WouldBlock:
            pass
        with anyio.move_on_after(self.wait_s):
            await self._slots.acquire()
            return
        raise ApiError(
            503,
            "service_unavailable",
            f"too many submissions at once; retry in {self.retry_after_s} s",
            headers={"Retry-After": str(self.retry_after_s)},
        )

    async def __aexit__(self, *_: object) -> None:
        self._slots.release()


async def admit_submission(request: Request) -> AsyncIterator[None]:
    """Holds an admission slot for the whole submission (listed before the session, so the
    session closes first)."""
    admission: Admission = request.app.state.admission
    async with admission:
        yield


ADMITTED = Depends(admit_submission)
"""For the `dependencies` of every route that submits a job."""
