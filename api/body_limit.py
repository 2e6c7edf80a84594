"""A size limit on request bodies: 413 in the documented error shape, before or while reading.

Trace uploads stream to disk under their own limit (api/routes/traces.py) and are exempt."""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import ApiError, error_body

__all__ = ["BodyLimit", "body_too_large"]


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the request body exceeds the limit of {limit} bytes")


class BodyLimit:
    """Answers 413 when Content-Length announces more than ``limit`` bytes; a body sent without
    it (chunked) fails with the same error once the bytes read pass the limit."""

    def __init__(self, app: ASGIApp, limit: int, exempt: Callable[[Scope], bool] = lambda _: False) -> None:
        self.app, self.limit, self.exempt = app, limit, exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope):
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            error = body_too_large(self.limit)
            await JSONResponse(error_body(error.code, error.message), status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise body_too_large(self.limit)
            return message

        await self.app(scope, counted, send)
