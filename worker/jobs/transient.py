"""Errors that mean "try again shortly": the database or the broker was briefly unreachable.
Job functions re-raise them (the Celery task retries with backoff) instead of failing the job."""

from __future__ import annotations

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc

__all__ = ["TRANSIENT"]

TRANSIENT: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
