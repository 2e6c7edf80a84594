"""JSON bodies whose strings are not text: a lone UTF-16 surrogate (``"\\ud800"``, or its raw
CESU-8 bytes) parses as a Python string that cannot be encoded, stored or echoed, and reached every
route as a 500. Such a body is refused with 422 naming the field, before any route sees it.

The common body has no surrogate escape at all: one bytes scan decides that, and only a body with
one is parsed here (a surrogate pair, an emoji say, is text and passes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import LONE_SURROGATE, ApiError, error_body

__all__ = ["LoneSurrogates", "lone_surrogate_path"]

_MAYBE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]")
"""A surrogate escape or the CESU-8 bytes of one: the only ways a lone surrogate gets in."""


def lone_surrogate_path(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path of the first string (a value or a key) holding a lone surrogate, or None."""
    if isinstance(value, str):
        return path if LONE_SURROGATE.search(value) else None
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = lone_surrogate_path(item, (*path, i))
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            if LONE_SURROGATE.search(key):
                return (*path, key)
            found = lone_surrogate_path(item, (*path, key))
            if found is not None:
                return found
    return None


class LoneSurrogates:
    """Reads a JSON request's body whole (BodyLimit, outside it, bounds its size) and answers 422
    when a string in it holds a lone surrogate; otherwise hands the same bytes on."""

    def __init__(self, app: ASGIApp, exempt: Callable[[Scope], bool] = lambda _: False) -> None:
        self.app, self.exempt = app, exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope) or "json" not in Headers(scope=scope).get("content-type", ""):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            try:
                message = await receive()
            except ApiError as exc:  # the body limit, outside this middleware: 413
                await JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away: let the app see it
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        path = self._lone(body)
        if path is not None:
            where = ".".join(map(str, ("body", *path)))
            msg = "a string holds a lone UTF-16 surrogate (not text); send valid Unicode"
            details = [{"loc": ["body", *path], "msg": msg, "input": None}]
            await JSONResponse(error_body("validation_error", f"{where}: {msg}", details), status_code=422)(
                scope, receive, send
            )
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _lone(body: bytes) -> tuple[str | int, ...] | None:
        if not _MAYBE.search(body):
            return None
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):  # not JSON: the route's own parsing answers
            return None
        return lone_surrogate_path(parsed)
