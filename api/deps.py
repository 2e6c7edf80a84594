"""Dependencies of the routes: settings, database session, storage, auth and the enqueuer."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session, sessionmaker

from api.errors import ApiError
from worker.db.session import get_engine
from worker.settings import Settings
from worker.storage import Storage


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


def get_session(settings: SettingsDep) -> Iterator[Session]:
    session = sessionmaker(get_engine(settings.db_url), expire_on_commit=False)()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def get_storage(settings: SettingsDep) -> Storage:
    return Storage(settings.storage)


StorageDep = Annotated[Storage, Depends(get_storage)]


def get_enqueue(request: Request) -> Any:
    return request.app.state.enqueue


EnqueueDep = Annotated[Any, Depends(get_enqueue)]


def require_token(settings: SettingsDep, authorization: Annotated[str | None, Header()] = None) -> None:
    """When LITEHIT_API_TOKEN is set, every /v1 route needs ``Authorization: Bearer <token>``."""
    if not settings.api_token:
        return
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), settings.api_token.encode()):
        raise ApiError(401, "unauthorized", "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
