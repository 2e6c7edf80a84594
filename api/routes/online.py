"""/v1/online/* of the public API: forwarded to the owner process of the instance's shard, so
that clients use one address while each instance's state lives in exactly one process. The
owner's own routes, which do the work, are in api/online.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from fastapi import APIRouter, Request, Response

from api.errors import ApiError
from api.schemas import OnlineInstanceAddress
from litehit.online.store import shard_of
from litehit.settings import Settings

router = APIRouter(prefix="/online", tags=["online"])

FORWARDED = ("content-type", "authorization", "idempotency-key")


def _owners(request: Request) -> list[str]:
    settings: Settings = request.app.state.settings
    urls = settings.online_owner_urls
    if not urls:
        raise ApiError(
            503,
            "online_not_configured",
            "online mode is not configured: start an owner (uvicorn api.online:app) and set LITEHIT_ONLINE_URLS",
        )
    if len(urls) != settings.online_shards:
        raise ApiError(
            503,
            "online_misconfigured",
            f"LITEHIT_ONLINE_URLS has {len(urls)} owners for {settings.online_shards} shards",
        )
    return urls


async def _forward(request: Request, base: str, path: str) -> Response:
    client: httpx.AsyncClient = request.app.state.online_client
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
    try:
        answer = await client.request(
            request.method,
            f"{base}{path}",
            params=request.query_params,
            content=await request.body(),
            headers=headers,
        )
    except httpx.HTTPError as exc:
        raise ApiError(502, "owner_unreachable", f"the online owner at {base} did not answer: {exc}") from None
    return Response(answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type"))


def _owner_of(request: Request, instance_id: str) -> str:
    urls = _owners(request)
    return urls[shard_of(instance_id, len(urls))]


@router.post("/groups", status_code=201, summary="Register an instance group (stored once, used by every shard)")
async def create_group(request: Request) -> Response:
    return await _forward(request, _owners(request)[0], "/v1/online/groups")


@router.get("/groups", summary="List instance groups")
async def list_groups(request: Request) -> Response:
    return await _forward(request, _owners(request)[0], "/v1/online/groups")


@router.post("/instances", status_code=201, summary="Register an instance on the shard that owns it")
async def create_instance(request: Request, body: OnlineInstanceAddress) -> Response:
    return await _forward(request, _owner_of(request, body.instance_id), "/v1/online/instances")


@router.get("/instances", summary="ListInstances over every shard")
async def list_instances(request: Request) -> dict[str, Any]:
    client: httpx.AsyncClient = request.app.state.online_client
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
    items: list[dict[str, Any]] = []
    for base in _owners(request):
        try:
            answer = await client.get(f"{base}/v1/online/instances", headers=headers)
        except httpx.HTTPError as exc:
            raise ApiError(502, "owner_unreachable", f"the online owner at {base} did not answer: {exc}") from None
        if answer.status_code != 200:
            return Response(answer.content, status_code=answer.status_code, media_type="application/json")  # type: ignore[return-value]
        items += answer.json()["items"]
    return {"items": sorted(items, key=lambda i: i["instance_id"].encode())}


async def _forward_instance(request: Request, instance_id: str, rest: str = "") -> Response:
    """Forwards a request about one instance to its owner. The id is one path segment,
    percent-encoded: '#', '?', '/' or control characters in it stay part of the id."""
    path = f"/v1/online/instances/{quote(instance_id, safe='')}{rest}"
    return await _forward(request, _owner_of(request, instance_id), path)


@router.get("/instances/{instance_id}", summary="One instance (forwarded to its owner)")
async def get_instance(request: Request, instance_id: str) -> Response:
    return await _forward_instance(request, instance_id)


@router.delete("/instances/{instance_id}", summary="Remove an instance (forwarded to its owner)")
async def delete_instance(request: Request, instance_id: str) -> Response:
    return await _forward_instance(request, instance_id)


@router.post("/instances/{instance_id}/trace-queries", summary="One trace query (forwarded to the instance's owner)")
async def trace_query(request: Request, instance_id: str) -> Response:
    return await _forward_instance(request, instance_id, "/trace-queries")


@router.post("/instances/{instance_id}/trace-queries/batch", summary="A batch of trace queries, applied in order")
async def trace_query_batch(request: Request, instance_id: str) -> Response:
    return await _forward_instance(request, instance_id, "/trace-queries/batch")
