"""Errors of the job machinery::

    LiteHitError (litehit.errors)
    +-- IdempotencyConflict       an Idempotency-Key was used before with a different request

TRANSIENT lists the errors that mean "try again shortly": the database or the broker was briefly
unreachable. The stage functions re-raise them (the Celery task retries with backoff) instead of
failing the job.
"""

from __future__ import annotations

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc

from litehit.errors import LiteHitError

__all__ = ["TRANSIENT", "IdempotencyConflict"]


class IdempotencyConflict(LiteHitError):
    """The Idempotency-Key was used before with a different request."""


TRANSIENT: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
