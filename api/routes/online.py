"""/v1/online/* of the public API: forwarded to the owner process of the instance's shard, so
that clients use one address while each instance's state lives in exactly one process. The
owner's own routes, which do the work, are in api/online.py."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Body, Query, Request, Response

from api.examples import (
    ONLINE_GROUP_EXAMPLES,
    ONLINE_INSTANCE_EXAMPLES,
    TRACE_QUERY_BATCH_EXAMPLES,
    TRACE_QUERY_EXAMPLES,
)
from api.forwarding import forward, owner_urls, send
from api.online_schemas import CurveParams, InstanceId, TraceQueryBatch, TraceQueryBody, curve_request
from litehit.online.store import shard_of
from litehit.settings import Settings
from litehit.spec import InstanceGroup, InstanceInfo

router = APIRouter(prefix="/online", tags=["online"])


def _owners(request: Request) -> list[str]:
    settings: Settings = request.app.state.settings
    start = "uvicorn api.online:app"
    return owner_urls(settings.online_owner_urls, settings.online_shards, "online", start, "LITEHIT_ONLINE_URLS")


def _owner_of(request: Request, instance_id: str) -> str:
    urls = _owners(request)
    return urls[shard_of(instance_id, len(urls))]


@router.post("/groups", status_code=201, summary="Register an instance group (stored once, used by every shard)")
async def create_group(
    request: Request, body: Annotated[InstanceGroup, Body(openapi_examples=ONLINE_GROUP_EXAMPLES)]
) -> Response:
    return await forward(request, _owners(request)[0], "/v1/online/groups")


@router.get("/groups", summary="List instance groups")
async def list_groups(request: Request) -> Response:
    return await forward(request, _owners(request)[0], "/v1/online/groups")


@router.post("/instances", status_code=201, summary="Register an instance on the shard that owns it")
async def create_instance(
    request: Request, body: Annotated[InstanceInfo, Body(openapi_examples=ONLINE_INSTANCE_EXAMPLES)]
) -> Response:
    return await forward(request, _owner_of(request, body.instance_id), "/v1/online/instances")


@router.get("/instances", summary="ListInstances over every shard")
async def list_instances(request: Request) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for base in _owners(request):
        answer = await send(request, "GET", f"{base}/v1/online/instances")
        if answer.status_code != 200:
            return Response(answer.content, status_code=answer.status_code, media_type="application/json")  # type: ignore[return-value]
        items += answer.json()["items"]
    return {"items": sorted(items, key=lambda i: i["instance_id"].encode())}


async def _forward_instance(request: Request, instance_id: str, rest: str = "") -> Response:
    """Forwards a request about one instance to its owner. The id is one path segment,
    percent-encoded: '#', '?', '/' or control characters in it stay part of the id."""
    path = f"/v1/online/instances/{quote(instance_id, safe='')}{rest}"
    return await forward(request, _owner_of(request, instance_id), path)


@router.get("/instances/{instance_id}", summary="One instance (forwarded to its owner)")
async def get_instance(request: Request, instance_id: InstanceId) -> Response:
    return await _forward_instance(request, instance_id)


@router.get(
    "/instances/{instance_id}/curve",
    summary="The live curve: exact hit rates at ANY capacity, and a tier split (forwarded to the owner)",
)
async def get_curve(request: Request, instance_id: InstanceId, params: Annotated[CurveParams, Query()]) -> Response:
    curve_request(params)  # a bad capacity is refused here, before forwarding
    return await _forward_instance(request, instance_id, "/curve")


@router.delete("/instances/{instance_id}", summary="Remove an instance (forwarded to its owner)")
async def delete_instance(request: Request, instance_id: InstanceId) -> Response:
    return await _forward_instance(request, instance_id)


@router.post("/instances/{instance_id}/trace-queries", summary="One trace query (forwarded to the instance's owner)")
async def trace_query(
    request: Request,
    instance_id: InstanceId,
    body: Annotated[TraceQueryBody, Body(openapi_examples=TRACE_QUERY_EXAMPLES)],
) -> Response:
    return await _forward_instance(request, instance_id, "/trace-queries")


@router.post("/instances/{instance_id}/trace-queries/batch", summary="A batch of trace queries, applied in order")
async def trace_query_batch(
    request: Request,
    instance_id: InstanceId,
    body: Annotated[TraceQueryBatch, Body(openapi_examples=TRACE_QUERY_BATCH_EXAMPLES)],
) -> Response:
    return await _forward_instance(request, instance_id, "/trace-queries/batch")
