"""/v1/attribution/* of the public API: forwarded to the attribution owner of the worker's shard
(api/attribution.py does the work), so clients and event sources use one address. A batch of
lookups over workers of several shards is split by shard, asked concurrently and merged back in
order. Forwards go through the API's :class:`~api.forwarding.Forwarder`: beyond
LITEHIT_FORWARD_LIMIT in flight (and LITEHIT_FORWARD_WAIT_S of waiting for a turn) a request is
answered 503 with Retry-After, a batch as a whole."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response

from api.attribution_schemas import AttributionResult, EventBatchBody, LookupBatch, LookupBody, WorkerName
from api.errors import ApiError
from api.forwarding import forward, owner_urls, send
from litehit.attribution.answers import Attribution, Cause
from litehit.online.store import shard_of
from litehit.settings import Settings

router = APIRouter(prefix="/attribution", tags=["attribution"])

BASE = "/v1/attribution"


def _owners(request: Request) -> list[str]:
    settings: Settings = request.app.state.settings
    return owner_urls(
        settings.attribution_owner_urls,
        settings.attribution_shards,
        "attribution",
        "uvicorn api.attribution:app",
        "LITEHIT_ATTRIBUTION_URLS",
    )


def _owner_of(request: Request, worker: str) -> str:
    urls = _owners(request)
    return urls[shard_of(worker, len(urls))]


@router.post("/workers/{worker}/events", summary="One batch of a worker's KV events (forwarded to its owner)")
async def post_events(request: Request, worker: WorkerName, body: EventBatchBody) -> Response:
    return await forward(request, _owner_of(request, worker), f"{BASE}/workers/{quote(worker, safe='')}/events")


@router.post(
    "/lookups",
    summary="Why did this lookup miss? (forwarded to the worker's owner)",
    response_model=AttributionResult,
)
async def lookup(request: Request, body: LookupBody) -> Response:
    return await forward(request, _owner_of(request, body.worker), f"{BASE}/lookups")


@router.post("/lookups/batch", summary="Many lookups over any workers, answered in order")
async def lookup_batch(request: Request, body: LookupBatch) -> dict[str, list[Any]]:
    """Each shard's part goes to its owner concurrently. A shard whose owner does not answer, or
    answers with an error, has its lookups answered unknown (the owner cannot be established);
    the other shards' answers stand."""
    urls = _owners(request)
    by_shard: dict[int, list[int]] = {}
    for i, item in enumerate(body.lookups):
        by_shard.setdefault(shard_of(item.worker, len(urls)), []).append(i)

    async def ask(shard: int, positions: list[int]) -> list[Any]:
        part = {"lookups": [body.lookups[i].model_dump() for i in positions]}
        try:
            answer = await send(
                request, "POST", f"{urls[shard]}{BASE}/lookups/batch", content=json.dumps(part).encode()
            )
        except ApiError as exc:
            if exc.code != "owner_unreachable":
                raise  # e.g. 503: too many forwards in flight; the client retries the whole batch
            return [_unreachable(shard, exc.message)] * len(positions)
        if answer.status_code != 200:
            return [_unreachable(shard, f"it answered HTTP {answer.status_code}")] * len(positions)
        results: list[Any] = answer.json()["results"]
        return results

    shards = sorted(by_shard)
    answers = await asyncio.gather(*(ask(s, by_shard[s]) for s in shards))
    results: list[Any] = [None] * len(body.lookups)
    for shard, part in zip(shards, answers, strict=True):
        for i, result in zip(by_shard[shard], part, strict=True):
            results[i] = result
    return {"results": results}


def _unreachable(shard: int, why: str) -> dict[str, Any]:
    reason = f"the owner of attribution shard {shard} cannot be reached: {why}"
    return Attribution.of(Cause.OWNER_UNREACHABLE, reason).as_dict()


@router.get("/workers", summary="Every shard's workers: evidence, coverage, lag and counters")
async def list_workers(request: Request) -> Any:
    items: list[dict[str, Any]] = []
    for base in _owners(request):
        answer = await send(request, "GET", f"{base}{BASE}/workers")
        if answer.status_code != 200:
            return Response(answer.content, status_code=answer.status_code, media_type="application/json")
        items += answer.json()["items"]
    return {"items": sorted(items, key=lambda i: i["worker"].encode())}
