"""Dependencies of the routes: settings, database session, storage, auth and the enqueuer.

They are ``async`` although they do no I/O: FastAPI then calls them on the event loop instead
of handing each one to the thread pool, which matters at hundreds of requests per second."""

from __future__ import annotations

import functools
import hmac
import os
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session, sessionmaker

from api.errors import ApiError
from litehit.db.session import get_engine
from litehit.settings import Settings
from litehit.storage import Storage
from worker.jobs.submit import Enqueue


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


async def require_token(settings: SettingsDep, authorization: Annotated[str | None, Header()] = None) -> None:
    """When LITEHIT_API_TOKEN is set, every /v1 route needs ``Authorization: Bearer <token>``."""
    if not settings.api_token:
        return
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), settings.api_token.encode()):
        raise ApiError(401, "unauthorized", "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
