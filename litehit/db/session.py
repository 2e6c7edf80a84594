"""Engines and sessions, created lazily per process (never shared across fork)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from litehit.settings import get_settings

__all__ = ["dispose_engine", "ensure_sqlite_dir", "get_engine", "session_scope"]

_engines: dict[tuple[int, str], Engine] = {}


def ensure_sqlite_dir(url: str) -> None:
    """An embedded SQLite database lives in a directory that may not exist yet."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def get_engine(url: str | None = None) -> Engine:
    """The engine of this process for url (default: the settings' database)."""
    url = url or get_settings().db_url
    key = (os.getpid(), url)
    engine = _engines.get(key)
    if engine is None:
        if url.startswith("sqlite:///"):
            ensure_sqlite_dir(url)
            engine = create_engine(url, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            settings = get_settings()
            size = settings.db_pool_size
            engine = create_engine(
                url, pool_pre_ping=True, pool_size=size, max_overflow=size, pool_timeout=settings.db_pool_timeout_s
            )
        _engines[key] = engine
    return engine


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def dispose_engine() -> None:
    """Forgets engines inherited from a parent process (call right after fork)."""
    for (pid, _), engine in list(_engines.items()):
        if pid != os.getpid():
            engine.dispose(close=False)
    _engines.clear()


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session committed on success and rolled back on error."""
    session = sessionmaker(get_engine(url), expire_on_commit=False)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
