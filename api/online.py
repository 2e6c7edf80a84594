"""The online owner: ``uvicorn api.online:app`` (exactly one process per shard).

Design (one place per instance, arrival order, scale out by instance):
- Instances are split into LITEHIT_ONLINE_SHARDS shards by a stable hash of their id
  (litehit.online.store.shard_of). Each shard has exactly one owner process, this app started
  with LITEHIT_ONLINE_SHARD=<i>; it holds a lease row in SQL, renewed every few seconds, and a
  second process for the same shard refuses to start while the lease is alive.
- Handlers are ``async`` and do their (C) work inline on the event loop: requests are applied
  one at a time, in the order the owner receives them, and no two threads ever touch a core.
- Configuration (groups, instances) is in SQL. Counters are snapshotted to SQL every
  LITEHIT_ONLINE_SNAPSHOT_S and at shutdown, and restored at start; the LRU state starts empty
  after a restart, which ``state_since`` shows.
- The public API (api.main) forwards /v1/online/* to the owner of the instance, so clients use
  one address; an owner can also be called directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import anyio
from fastapi import APIRouter, Depends, FastAPI
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import delete

from api.deps import require_token
from api.errors import ApiError, install_error_handlers
from litehit.db.models import OnlineGroup, OnlineInstance, new_id, utcnow
from litehit.db.session import session_scope
from litehit.errors import ConfigError, ConfigIssue
from litehit.online.engine import OnlineInstance as LiveInstance
from litehit.online.engine import RequestRejected, TraceQuery
from litehit.online.store import claim_shard, load_groups, load_instances, release_shard, save_counters, shard_of
from litehit.settings import Settings, get_settings
from litehit.spec import InstanceGroup, InstanceInfo, group_issues, instance_issues
from worker.jobs.state import me

__all__ = ["OnlineOwner", "create_online_app"]

log = logging.getLogger("litehit.online")
LEASE_S = 15.0


class TraceQueryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    block_keys: list[int] = Field(
        description="full-block keys, front to back (prefix-chained, or raw hashes when the group has enable_prefix_hash)"
    )
    input_token_len: int | None = Field(
        default=None, ge=0, description="tokens of the request; missing: keys x block_size"
    )
    timestamp_ns: int | None = Field(default=None, ge=0, description="default: wall clock (TTL groups age by it)")


class TraceQueryBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[TraceQueryBody] = Field(min_length=1, description="applied in order")


class OnlineOwner:
    """The live instances of one shard."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.shard, self.shards = settings.online_shard, settings.online_shards
        self.owner = f"{me()}:shard{self.shard}:{new_id()[:8]}"  # unique even for pid 1 in a container
        self.instances: dict[str, LiveInstance] = {}
        self.leased = False
        self.last_snapshot: datetime | None = None

    def start(self) -> None:
        if not 0 <= self.shard < self.shards:
            raise RuntimeError(f"LITEHIT_ONLINE_SHARD={self.shard} must be in [0, {self.shards})")
        with session_scope(self.settings.db_url) as session:
            if not claim_shard(session, self.shard, self.owner, LEASE_S):
                raise RuntimeError(f"online shard {self.shard} is already owned by a live process")
            self.leased = True
            groups = load_groups(session)
            for row in load_instances(session, self.shard):
                info = InstanceInfo.model_validate(row.config)
                group = InstanceGroup.model_validate(groups[row.group_name])
                self.instances[row.instance_id] = LiveInstance(info, group, row.counters)
            self.last_snapshot = max(
                (r.snapshot_at for r in load_instances(session, self.shard) if r.snapshot_at), default=None
            )

    def stop(self) -> None:
        if self.leased:
            self.snapshot()
            with session_scope(self.settings.db_url) as session:
                release_shard(session, self.shard, self.owner)
            self.leased = False
        for inst in self.instances.values():
            inst.close()

    def snapshot(self) -> None:
        dirty = {i: inst.counters.as_dict() for i, inst in self.instances.items() if inst.dirty}
        if dirty:
            with session_scope(self.settings.db_url) as session:
                save_counters(session, dirty)
            for i in dirty:
                self.instances[i].dirty = False
        self.last_snapshot = utcnow()

    def renew(self) -> None:
        with session_scope(self.settings.db_url) as session:
            self.leased = claim_shard(session, self.shard, self.owner, LEASE_S)
        if not self.leased:
            log.error("lost the lease of online shard %d: serving nothing until restarted", self.shard)

    def require_lease(self) -> None:
        if not self.leased:
            raise ApiError(503, "not_owner", f"this process no longer owns online shard {self.shard}")

    def instance(self, instance_id: str) -> LiveInstance:
        self.require_lease()
        inst = self.instances.get(instance_id)
        if inst is None:
            if shard_of(instance_id, self.shards) != self.shard:
                raise ApiError(
                    421, "wrong_shard", f"instance {instance_id} belongs to shard {shard_of(instance_id, self.shards)}"
                )
            raise ApiError(404, "not_found", f"no online instance with id {instance_id}")
        return inst

    def view(self, inst: LiveInstance) -> dict[str, Any]:
        return {**inst.summary(), "shard": self.shard, "snapshot_at": self.last_snapshot}


def _validate(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            [
                ConfigIssue(".".join(map(str, e["loc"])), e.get("input"), e["msg"].removeprefix("Value error, "))
                for e in exc.errors()
            ]
        ) from None


def _routes(owner: OnlineOwner) -> APIRouter:
    router = APIRouter(prefix="/v1/online", tags=["online"], dependencies=[Depends(require_token)])

    @router.post("/groups", status_code=201, summary="Register an instance group (CreateInstanceGroup)")
    async def create_group(body: dict[str, Any]) -> dict[str, Any]:
        group = _validate(InstanceGroup, body)
        with session_scope(owner.settings.db_url) as session:
            existing = set(load_groups(session))
            issues = group_issues(group, "", existing)
            if any(i.path == ".name" for i in issues):
                raise ApiError(409, "conflict", f"instance group {group.name!r} already exists")
            if not group.name:
                issues.insert(0, ConfigIssue("name", group.name, "the group name must not be empty"))
            if issues:
                raise ConfigError([ConfigIssue(i.path.lstrip("."), i.value, i.message) for i in issues])
            session.add(OnlineGroup(name=group.name, config=group.model_dump(mode="json")))
        data: dict[str, Any] = group.model_dump(mode="json")
        return data

    @router.get("/groups", summary="List instance groups")
    async def list_groups() -> dict[str, Any]:
        with session_scope(owner.settings.db_url) as session:
            items: list[dict[str, Any]] = [{"name": n, **c} for n, c in sorted(load_groups(session).items())]
        return {"items": items}

    @router.post("/instances", status_code=201, summary="Register an instance (RegisterInstance)")
    async def create_instance(body: dict[str, Any]) -> dict[str, Any]:
        owner.require_lease()
        info = _validate(InstanceInfo, body)
        with session_scope(owner.settings.db_url) as session:
            groups = load_groups(session)
            issues = [
                ConfigIssue(i.path.lstrip("."), i.value, i.message) for i in instance_issues(info, set(groups), "")
            ]
            if info.linear_step != 0:
                issues.append(
                    ConfigIssue(
                        "linear_step", info.linear_step, "online LiteHit instances are Full-only (linear_step 0)"
                    )
                )
            if issues:
                raise ConfigError(issues)
            if shard_of(info.instance_id, owner.shards) != owner.shard:
                raise ApiError(
                    421,
                    "wrong_shard",
                    f"instance {info.instance_id} belongs to shard {shard_of(info.instance_id, owner.shards)}",
                )
            if session.get(OnlineInstance, info.instance_id) is not None:
                raise ApiError(409, "conflict", f"instance {info.instance_id!r} already exists")
            group = InstanceGroup.model_validate(groups[info.instance_group_name])
            live = LiveInstance(info, group)
            session.add(
                OnlineInstance(
                    instance_id=info.instance_id,
                    group_name=group.name,
                    shard=owner.shard,
                    config=info.model_dump(mode="json"),
                    counters=live.counters.as_dict(),
                )
            )
        owner.instances[info.instance_id] = live
        return owner.view(live)

    @router.get("/instances", summary="ListInstances: counters, hit rates per slot, engine state")
    async def list_instances() -> dict[str, Any]:
        return {"items": [owner.view(owner.instances[i]) for i in sorted(owner.instances)], "shard": owner.shard}

    @router.get("/instances/{instance_id}", summary="One instance's counters and hit rates")
    async def get_instance(instance_id: str) -> dict[str, Any]:
        return owner.view(owner.instance(instance_id))

    @router.delete("/instances/{instance_id}", summary="Remove an instance and its state")
    async def delete_instance(instance_id: str) -> dict[str, Any]:
        inst = owner.instance(instance_id)
        with session_scope(owner.settings.db_url) as session:
            session.execute(delete(OnlineInstance).where(OnlineInstance.instance_id == instance_id))
        view = owner.view(inst)
        del owner.instances[instance_id]
        inst.close()
        return view

    @router.post("/instances/{instance_id}/trace-queries", summary="One request: hits per capacity slot (TraceQuery)")
    async def trace_query(instance_id: str, body: TraceQueryBody) -> dict[str, Any]:
        inst = owner.instance(instance_id)
        try:
            (result,) = inst.query([TraceQuery(body.block_keys, body.input_token_len, body.timestamp_ns)])
        except RequestRejected as exc:
            raise ApiError(
                422, "rejected", exc.message, details=[{"loc": ["body", "block_keys"], "msg": exc.message}]
            ) from None
        except OverflowError as exc:
            raise ApiError(
                422, "rejected", str(exc), details=[{"loc": ["body", "block_keys"], "msg": str(exc)}]
            ) from None
        return {"instance_id": instance_id, **result}

    @router.post(
        "/instances/{instance_id}/trace-queries/batch", summary="Many requests of one instance, applied in order"
    )
    async def trace_query_batch(instance_id: str, body: TraceQueryBatch) -> dict[str, Any]:
        inst = owner.instance(instance_id)
        queries = [TraceQuery(r.block_keys, r.input_token_len, r.timestamp_ns) for r in body.requests]
        try:
            results = inst.query(queries)
        except RequestRejected as exc:
            loc: list[Any] = ["body", "requests", exc.index, "block_keys"]
            raise ApiError(
                422,
                "rejected",
                f"requests[{exc.index}]: {exc.message}; nothing was applied",
                details=[{"loc": loc, "msg": exc.message}],
            ) from None
        except OverflowError as exc:
            raise ApiError(422, "rejected", f"{exc}; nothing was applied") from None
        return {"instance_id": instance_id, "results": results}

    return router


def create_online_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    owner = OnlineOwner(settings)

    async def housekeeping() -> None:
        while True:
            await asyncio.sleep(min(settings.online_snapshot_s, LEASE_S / 3))
            try:
                await anyio.to_thread.run_sync(owner.renew)
                if (
                    owner.last_snapshot is None
                    or (utcnow() - owner.last_snapshot).total_seconds() >= settings.online_snapshot_s
                ):
                    owner.snapshot()  # on the loop: counters never change mid-snapshot
            except Exception as exc:  # database briefly down: next round
                log.warning("online housekeeping failed: %s", exc)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owner.start()
        task = asyncio.create_task(housekeeping())
        gc.freeze()
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            owner.stop()

    app = FastAPI(title="LiteHit online owner", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.owner = owner
    install_error_handlers(app)
    app.include_router(_routes(owner))

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok" if owner.leased else "not owner",
            "shard": owner.shard,
            "shards": owner.shards,
            "instances": len(owner.instances),
        }

    return app


def __getattr__(name: str) -> Any:  # ``uvicorn api.online:app``
    if name == "app":
        globals()["app"] = application = create_online_app()
        return application
    raise AttributeError(name)
