"""One error shape for every failure: {"error": {"code", "message", "details": [{loc, msg, input}]}}."""

from __future__ import annotations

import errno
import logging
import math
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from litehit.errors import (
    AlreadyRegistered,
    ConfigError,
    FactsError,
    LiteHitError,
    NotShardOwner,
    OnlineError,
    QueryError,
    StorageError,
    UnknownInstance,
    WrongShard,
)
from litehit.publish import storage_reason
from litehit.spec import error_subject

__all__ = ["LONE_SURROGATE", "ApiError", "error_body", "install_error_handlers", "text_of"]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details = details or []
        self.headers = headers


ONLINE_STATUS: dict[type[OnlineError], tuple[int, str]] = {
    NotShardOwner: (503, "not_owner"),
    WrongShard: (421, "wrong_shard"),
    UnknownInstance: (404, "not_found"),
    AlreadyRegistered: (409, "conflict"),
}
"""HTTP status and code of the errors of an online shard owner."""

TOO_DEEP = "the JSON body nests too deeply"
DB_RETRY_AFTER_S = 5
"""Retry-After of the 503 answered while the database cannot be reached."""
STORAGE_RETRY_AFTER_S = 60
"""Retry-After of the 503 answered while the storage is full or read-only."""
STORAGE_TROUBLE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)

log = logging.getLogger("litehit.api")


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def text_of(value: str) -> str:
    """The string with every lone UTF-16 surrogate written as its escape (``\\ud800``): a string
    an error can always echo (JSON bodies may hold them; UTF-8 cannot)."""
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", value) if LONE_SURROGATE.search(value) else value


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    safe = [{**d, "msg": text_of(str(d.get("msg", "")))} for d in details or []]
    return {"error": {"code": code, "message": text_of(message), "details": safe}}


MAX_ECHO_DEPTH = 8
"""How deeply an error echoes the offending input; deeper parts read "...". """
MAX_ECHO_CHARS = 200
"""How much of a long offending string an error echoes (then "...")."""
MAX_ECHO_ITEMS = 20
"""How many items of a long offending list or object an error echoes (then "...")."""


def _json_safe(value: Any, depth: int = 0) -> Any:
    """The offending input as plain JSON: NaN and Infinity as the strings "NaN", "Infinity" and
    "-Infinity" (JSON has no such numbers), deep nesting cut at MAX_ECHO_DEPTH."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return text_of(value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS] + "...")
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple | dict) and depth >= MAX_ECHO_DEPTH:
        return "..."
    if isinstance(value, list | tuple):
        items = [_json_safe(v, depth + 1) for v in value[:MAX_ECHO_ITEMS]]
        return [*items, "..."] if len(value) > MAX_ECHO_ITEMS else items
    if isinstance(value, dict):
        pairs = list(value.items())
        shown = {text_of(str(k)): _json_safe(v, depth + 1) for k, v in pairs[:MAX_ECHO_ITEMS]}
        return {**shown, "...": "..."} if len(pairs) > MAX_ECHO_ITEMS else shown
    return repr(value)


def _loc(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.replace("]", "").replace("[", ".").split("."):
        if part:
            out.append(int(part) if part.isdigit() else part)
    return out


def config_error_response(exc: ConfigError) -> JSONResponse:
    details = [{"loc": ["body", *_loc(i.path)], "msg": i.message, "input": _json_safe(i.value)} for i in exc.issues]
    return JSONResponse(error_body("validation_error", str(exc), details), status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = []
        for e in exc.errors():
            loc, value = error_subject(e)
            details.append(
                {"loc": list(loc), "msg": str(e["msg"]).removeprefix("Value error, "), "input": _json_safe(value)}
            )
        message = "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in details)
        return JSONResponse(error_body("validation_error", message, details), status_code=422)

    @app.exception_handler(ConfigError)
    async def config_error(_: Request, exc: ConfigError) -> JSONResponse:
        return config_error_response(exc)

    @app.exception_handler(StorageError)
    async def storage_error(_: Request, exc: StorageError) -> JSONResponse:
        return JSONResponse(error_body("forbidden_path", str(exc)), status_code=422)

    @app.exception_handler(OnlineError)
    async def online_error(_: Request, exc: OnlineError) -> JSONResponse:
        status, code = next((v for t, v in ONLINE_STATUS.items() if isinstance(exc, t)), (422, "unprocessable"))
        return JSONResponse(error_body(code, str(exc)), status_code=status)

    @app.exception_handler(FactsError)
    @app.exception_handler(QueryError)
    async def bad_facts(_: Request, exc: LiteHitError) -> JSONResponse:
        return JSONResponse(error_body("unprocessable", str(exc)), status_code=422)

    # The database, not the request, is at fault: connection refused or lost, server shutting
    # down (OperationalError), a closed connection (InterfaceError), no pooled connection free.
    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    @app.exception_handler(PoolTimeout)
    async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            error_body("service_unavailable", "the database is unavailable; retry later"),
            status_code=503,
            headers={"Retry-After": str(DB_RETRY_AFTER_S)},
        )

    # A full or read-only storage (an upload, a job's folder) is said so, without its path.
    @app.exception_handler(OSError)
    async def storage_unavailable(request: Request, exc: OSError) -> JSONResponse:
        if exc.errno not in STORAGE_TROUBLE:
            return await internal_error(request, exc)
        return JSONResponse(
            error_body("service_unavailable", f"{storage_reason(exc)}; nothing was stored, retry later"),
            status_code=503,
            headers={"Retry-After": str(STORAGE_RETRY_AFTER_S)},
        )

    # Anything else is a bug: logged with its traceback, answered in the same shape, its
    # details (paths, values) kept out of the answer.
    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %s: %s", type(exc).__name__, exc, exc_info=exc)
        return JSONResponse(error_body("internal_error", f"internal error ({type(exc).__name__})"), status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, ApiError):  # raised while FastAPI read the body (its size limit)
            return await api_error(_, exc.__cause__)
        if isinstance(exc.__cause__, RecursionError):  # FastAPI could not parse the JSON body
            details = [{"loc": ["body"], "msg": TOO_DEEP, "input": None}]
            return JSONResponse(error_body("validation_error", f"body: {TOO_DEEP}", details), status_code=422)
        code = {404: "not_found", 413: "payload_too_large", 405: "method_not_allowed", 401: "unauthorized"}.get(
            exc.status_code, "http_error"
        )
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )
