"""Forwarding a public API request to the owner process of a shard (online instances,
attribution workers), so that clients use one address while each shard's state lives in
exactly one process."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import Request, Response

from api.errors import ApiError

__all__ = ["FORWARDED", "forward", "owner_urls", "send"]

FORWARDED = ("content-type", "authorization", "idempotency-key")


def owner_urls(urls: list[str], shards: int, what: str, start: str, setting: str) -> list[str]:
    """The owners' base URLs, one per shard; 503 when they are not configured. ``what`` names the
    owners ("online", "attribution"), ``start`` how to start one, ``setting`` the URL variable."""
    if not urls:
        raise ApiError(
            503,
            f"{what}_not_configured",
            f"{what} mode is not configured: start an owner ({start}) and set {setting}",
        )
    if len(urls) != shards:
        raise ApiError(503, f"{what}_misconfigured", f"{setting} has {len(urls)} owners for {shards} shards")
    return urls


async def send(
    request: Request, method: str, url: str, *, content: bytes | None = None, params: Any = None
) -> httpx.Response:
    """One request to an owner with the caller's forwarded headers; 502 when it does not answer."""
    client: httpx.AsyncClient = request.app.state.online_client
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
    try:
        return await client.request(method, url, params=params, content=content, headers=headers)
    except httpx.HTTPError as exc:
        raise ApiError(502, "owner_unreachable", f"the owner at {url} did not answer: {exc}") from None


async def forward(request: Request, base: str, path: str) -> Response:
    """The request, unchanged, to ``base + path``; the owner's answer, unchanged."""
    answer = await send(
        request, request.method, f"{base}{path}", content=await request.body(), params=request.query_params
    )
    return Response(answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type"))
