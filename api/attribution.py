"""The attribution owner app: ``uvicorn api.attribution:app`` (exactly one process per shard).

Workers (engine replicas) are split into LITEHIT_ATTRIBUTION_SHARDS shards by a stable hash of
their name; the owner of a shard holds a lease in SQL (litehit.lease) and the evidence of its
workers in memory (litehit.attribution.owner). Events arrive over HTTP (POST .../events) or from
the ZMQ subscribers of LITEHIT_ATTRIBUTION_ZMQ; lookups ask why a request missed. The public API
forwards /v1/attribution/* here by worker (api/routes/attribution.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request

from api.attribution_metrics import AttributionCollector, Latency
from api.attribution_schemas import AttributionResult, EventBatchBody, LookupBatch, LookupBody, WorkerName
from api.deps import require_token
from api.owner_app import create_owner_app
from litehit.attribution.owner import AttributionOwner
from litehit.settings import Settings, get_settings

__all__ = ["create_attribution_app"]  # and ``app``, built on first access (see __getattr__)

log = logging.getLogger("litehit.attribution")


async def get_owner(request: Request) -> AttributionOwner:
    owner: AttributionOwner = request.app.state.owner
    return owner


OwnerDep = Annotated[AttributionOwner, Depends(get_owner)]

routes = APIRouter(prefix="/v1/attribution", tags=["attribution"], dependencies=[Depends(require_token)])


@routes.post("/workers/{worker}/events", summary="One batch of a worker's KV events (stored / removed / cleared)")
async def post_events(worker: WorkerName, body: EventBatchBody, owner: OwnerDep, request: Request) -> dict[str, Any]:
    start = time.perf_counter()
    result = owner.apply(worker, body.batch(default_ts=owner.store.wall()))
    request.app.state.latency.apply.observe(time.perf_counter() - start)
    return {"worker": worker, "epoch": body.epoch, "seq": body.seq, "result": result.value}


@routes.post("/lookups", summary="Why did this lookup miss? (the request's first uncached block)")
async def lookup(body: LookupBody, owner: OwnerDep, request: Request) -> AttributionResult:
    start = time.perf_counter()
    (answer,) = owner.lookup_many([body.lookup()])
    request.app.state.latency.lookup.observe(time.perf_counter() - start)
    return AttributionResult.model_validate(answer.as_dict())


@routes.post("/lookups/batch", summary="Many lookups, answered in order")
async def lookup_batch(body: LookupBatch, owner: OwnerDep, request: Request) -> dict[str, list[AttributionResult]]:
    start = time.perf_counter()
    answers = owner.lookup_many([item.lookup() for item in body.lookups])
    request.app.state.latency.lookup.observe(time.perf_counter() - start)
    return {"results": [AttributionResult.model_validate(a.as_dict()) for a in answers]}


@routes.get("/workers", summary="The workers of this shard: evidence, coverage, lag and counters")
async def list_workers(owner: OwnerDep) -> dict[str, Any]:
    owner.require_lease()
    items = [{"worker": name, "shard": owner.shard, **stats} for name, stats in owner.workers().items()]
    return {"items": items, "shard": owner.shard}


health_routes = APIRouter(tags=["health"])


@health_routes.get("/healthz", summary="Whether this process owns its shard")
async def healthz(owner: OwnerDep) -> dict[str, Any]:
    return {
        "status": "ok" if owner.lease.held else "not owner",
        "shard": owner.shard,
        "shards": owner.shards,
        "workers": len(owner.store.workers),
        "window_s": owner.store.window_s,
        "bucket_s": owner.store.bucket_s,
        "reorder_grace_s": owner.store.reorder_grace_s,
    }


def create_attribution_app(
    settings: Settings | None = None, *, make_owner: Callable[[Settings], AttributionOwner] = AttributionOwner
) -> FastAPI:
    """The owner app; ``make_owner`` builds the owner at startup (tests pass clocks through it)."""
    app = create_owner_app(
        "LiteHit attribution owner",
        settings or get_settings(),
        make_owner,
        [routes, health_routes],
        lambda app: [AttributionCollector(lambda: getattr(app.state, "owner", None))],
        log,
    )
    app.state.latency = Latency(app.state.metrics.registry)
    return app


def __getattr__(name: str) -> Any:  # ``uvicorn api.attribution:app``
    if name == "app":
        globals()["app"] = application = create_attribution_app()
        return application
    raise AttributeError(name)
