"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import redis
from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from api.deps import SettingsDep
from litehit.db.session import get_engine

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    """On the event loop, not in the thread pool: it answers while the pool's threads are busy."""
    return {"status": "ok"}


@router.get(
    "/readyz", summary="The database and the broker are reachable", responses={503: {"description": "not ready"}}
)
def readyz(settings: SettingsDep) -> Any:
    checks: dict[str, str] = {}
    try:
        with get_engine(settings.db_url).connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    try:
        client = redis.Redis.from_url(settings.broker_url, socket_timeout=1, socket_connect_timeout=1)
        client.ping()
        client.close()
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"unreachable: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
    )
