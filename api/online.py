"""The online owner app: ``uvicorn api.online:app`` (exactly one process per shard).

Design (one place per instance, arrival order, scale out by instance):
- Instances are split into LITEHIT_ONLINE_SHARDS shards by a stable hash of their id
  (litehit.online.store.shard_of). Each shard has exactly one owner process, this app started
  with LITEHIT_ONLINE_SHARD=<i>; it holds a lease row in SQL, renewed every few seconds, and a
  second process for the same shard refuses to start while the lease is alive. SIGTERM (a
  graceful uvicorn shutdown) releases it; a dead owner's lease is taken over (ShardOwner.claim).
- The owner's state and rules live in litehit.online.owner.ShardOwner, built at startup; the
  routes here only translate HTTP to its calls.
- Handlers are ``async`` and do their (C) work inline on the event loop: requests are applied
  one at a time, in the order the owner receives them, and no two threads ever touch a core.
- Configuration (groups, instances) is in SQL. Counters are snapshotted to SQL every
  LITEHIT_ONLINE_SNAPSHOT_S and at shutdown, and restored at start; the LRU state starts empty
  after a restart, which ``state_since`` shows.
- The public API forwards /v1/online/* to the owner of the instance (api/routes/online.py), so
  clients use one address; an owner can also be called directly.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request

from api.deps import require_token
from api.errors import ApiError
from api.examples import (
    ONLINE_GROUP_EXAMPLES,
    ONLINE_INSTANCE_EXAMPLES,
    TRACE_QUERY_BATCH_EXAMPLES,
    TRACE_QUERY_EXAMPLES,
)
from api.online_schemas import CurveParams, InstanceId, TraceQueryBatch, TraceQueryBody, curve_request
from api.owner_app import create_owner_app
from api.owner_metrics import OwnerCollector
from litehit.online.engine import RequestRejected, TraceQuery
from litehit.online.owner import ShardOwner
from litehit.settings import Settings, get_settings
from litehit.spec import InstanceGroup, InstanceInfo

__all__ = ["create_online_app"]  # and ``app``, built on first access (see __getattr__)

log = logging.getLogger("litehit.online")


async def get_owner(request: Request) -> ShardOwner:
    owner: ShardOwner = request.app.state.owner
    return owner


OwnerDep = Annotated[ShardOwner, Depends(get_owner)]

owner_routes = APIRouter(prefix="/v1/online", tags=["online"], dependencies=[Depends(require_token)])


@owner_routes.post("/groups", status_code=201, summary="Register an instance group (CreateInstanceGroup)")
async def create_group(
    body: Annotated[InstanceGroup, Body(openapi_examples=ONLINE_GROUP_EXAMPLES)], owner: OwnerDep
) -> dict[str, Any]:
    return owner.create_group(body)


@owner_routes.get("/groups", summary="List instance groups")
async def list_groups(owner: OwnerDep) -> dict[str, Any]:
    return {"items": owner.groups()}


@owner_routes.post("/instances", status_code=201, summary="Register an instance (RegisterInstance)")
async def create_instance(
    body: Annotated[InstanceInfo, Body(openapi_examples=ONLINE_INSTANCE_EXAMPLES)], owner: OwnerDep
) -> dict[str, Any]:
    return owner.register(body)


@owner_routes.get("/instances", summary="ListInstances: counters, hit rates per slot, engine state")
async def list_instances(owner: OwnerDep) -> dict[str, Any]:
    return {"items": owner.views(), "shard": owner.shard}


@owner_routes.get("/instances/{instance_id}", summary="One instance's counters and hit rates")
async def get_instance(instance_id: InstanceId, owner: OwnerDep) -> dict[str, Any]:
    return owner.view(owner.instance(instance_id))


@owner_routes.get(
    "/instances/{instance_id}/curve",
    summary="The live curve: exact hit rates at ANY capacity of the requests so far, and a tier split",
)
async def get_curve(
    instance_id: InstanceId, params: Annotated[CurveParams, Query()], owner: OwnerDep
) -> dict[str, Any]:
    capacities, tiers = curve_request(params)
    return owner.instance(instance_id).curve_view(capacities, tiers, params.mode, params.points)


@owner_routes.delete("/instances/{instance_id}", summary="Remove an instance and its state")
async def delete_instance(instance_id: InstanceId, owner: OwnerDep) -> dict[str, Any]:
    return owner.remove(instance_id)


@owner_routes.post("/instances/{instance_id}/trace-queries", summary="One request: hits per capacity slot (TraceQuery)")
async def trace_query(
    instance_id: InstanceId,
    body: Annotated[TraceQueryBody, Body(openapi_examples=TRACE_QUERY_EXAMPLES)],
    owner: OwnerDep,
) -> dict[str, Any]:
    try:
        (result,) = owner.query(instance_id, [_query(body)])
    except RequestRejected as exc:
        loc: list[Any] = ["body", exc.field]
        raise ApiError(422, "rejected", exc.message, details=[{"loc": loc, "msg": exc.message}]) from None
    except OverflowError as exc:
        loc = ["body", "block_keys"]
        raise ApiError(422, "rejected", str(exc), details=[{"loc": loc, "msg": str(exc)}]) from None
    return {"instance_id": instance_id, **result}


@owner_routes.post(
    "/instances/{instance_id}/trace-queries/batch", summary="Many requests of one instance, applied in order"
)
async def trace_query_batch(
    instance_id: InstanceId,
    body: Annotated[TraceQueryBatch, Body(openapi_examples=TRACE_QUERY_BATCH_EXAMPLES)],
    owner: OwnerDep,
) -> dict[str, Any]:
    try:
        results = owner.query(instance_id, [_query(r) for r in body.requests])
    except RequestRejected as exc:
        loc: list[Any] = ["body", "requests", exc.index, exc.field]
        raise ApiError(
            422,
            "rejected",
            f"requests[{exc.index}]: {exc.message}; nothing was applied",
            details=[{"loc": loc, "msg": exc.message}],
        ) from None
    except OverflowError as exc:
        raise ApiError(422, "rejected", f"{exc}; nothing was applied") from None
    return {"instance_id": instance_id, "results": results}


def _query(body: TraceQueryBody) -> TraceQuery:
    return TraceQuery(body.block_keys, body.input_token_len, body.timestamp_ns)


health_routes = APIRouter(tags=["health"])


@health_routes.get("/healthz", summary="Whether this process owns its shard")
async def healthz(owner: OwnerDep) -> dict[str, Any]:
    return {
        "status": "ok" if owner.leased else "not owner",
        "shard": owner.shard,
        "shards": owner.shards,
        "instances": len(owner.instances),
    }


def create_online_app(settings: Settings | None = None) -> FastAPI:
    return create_owner_app(
        "LiteHit online owner",
        settings or get_settings(),
        ShardOwner,
        [owner_routes, health_routes],
        lambda app: [OwnerCollector(lambda: getattr(app.state, "owner", None))],
        log,
    )


def __getattr__(name: str) -> Any:  # ``uvicorn api.online:app``
    if name == "app":
        globals()["app"] = application = create_online_app()
        return application
    raise AttributeError(name)
