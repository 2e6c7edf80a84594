"""Forwarding a public API request to the owner process of a shard (online instances,
attribution workers), so that clients use one address while each shard's state lives in
exactly one process.

One :class:`Forwarder` per API process (``app.state.forwarder``, made at startup): an async
client with a pool of at most ``LITEHIT_FORWARD_LIMIT`` connections, and as many forwards in
flight. A forward beyond them waits at most ``LITEHIT_FORWARD_WAIT_S`` for its turn (and at most
``WAITING_PER_SLOT`` times the limit wait at once), then is answered 503 with Retry-After: a burst
is answered, in part with "retry later", instead of queueing without bound in the connection
pool, whose waiters cost the event loop more the more there are (a burst of 2,000 lookups once
kept it from answering even /healthz for minutes). Waiting happens on the event loop, holding
nothing."""

from __future__ import annotations

import math
from typing import Any

import anyio
import httpx
from fastapi import Request, Response

from api.errors import ApiError
from litehit.settings import Settings

__all__ = ["FORWARDED", "WAITING_PER_SLOT", "Forwarder", "forward", "owner_urls", "send"]

FORWARDED = ("content-type", "authorization", "idempotency-key")
WAITING_PER_SLOT = 16
"""Forwards that may wait for a turn at once, per forward in flight; beyond, 503 at once."""
KEEPALIVE_S = 2.0
"""An idle pooled connection is closed after this long: well before the owner (uvicorn, 5 s by
default) closes it, so a request is never sent on a connection the owner is closing (a 502)."""


class Forwarder:
    """The API's forwards to owner processes. ``transport`` replaces the network (tests)."""

    def __init__(self, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.limit = settings.forward_limit
        self.wait_s = settings.forward_wait_s
        self.retry_after_s = max(1, math.ceil(self.wait_s))
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(60.0, connect=5.0),
            limits=httpx.Limits(
                max_connections=self.limit, max_keepalive_connections=self.limit, keepalive_expiry=KEEPALIVE_S
            ),
            transport=transport,
        )
        self._slots = anyio.Semaphore(self.limit)
        self._waiting = 0
        self.in_flight = 0
        self.refused = 0  # forwards answered 503 for want of a turn

    async def request(
        self, method: str, url: str, *, headers: dict[str, str], content: bytes | None = None, params: Any = None
    ) -> httpx.Response:
        """One request to an owner; 503 (Retry-After) when no turn comes in time, 502 when the owner
        does not answer."""
        await self._acquire()
        self.in_flight += 1
        try:
            return await self.client.request(method, url, params=params, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise ApiError(502, "owner_unreachable", f"the owner at {url} did not answer: {exc}") from None
        finally:
            self.in_flight -= 1
            self._slots.release()

    async def _acquire(self) -> None:
        try:
            self._slots.acquire_nowait()
            return
        except anyio.WouldBlock:
            pass
        if self._waiting < WAITING_PER_SLOT * self.limit and self.wait_s > 0:
            self._waiting += 1
            try:
                with anyio.move_on_after(self.wait_s):
                    await self._slots.acquire()
                    return
            finally:
                self._waiting -= 1
        self.refused += 1
        raise ApiError(
            503,
            "service_unavailable",
            f"{self.limit} requests to the owners are in flight already; retry in {self.retry_after_s} s",
            headers={"Retry-After": str(self.retry_after_s)},
        )

    async def aclose(self) -> None:
        await self.client.aclose()


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
    """One request to an owner with the caller's forwarded headers (see :meth:`Forwarder.request`)."""
    forwarder: Forwarder = request.app.state.forwarder
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
    return await forwarder.request(method, url, headers=headers, content=content, params=params)


async def forward(request: Request, base: str, path: str) -> Response:
    """The request, unchanged, to ``base + path``; the owner's answer, unchanged."""
    answer = await send(
        request, request.method, f"{base}{path}", content=await request.body(), params=request.query_params
    )
    return Response(answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type"))
