"""The owner of one online shard: the live instances of the shard, the lease that makes this
process their only owner, and their configuration and counters in SQL (litehit.online.store).

Life of an owner: claim() -> restore() -> serve, with renew() and snapshot() now and then ->
release(). Everything but claim() and renew() runs on one thread (the owner app's event loop),
so requests apply one at a time, in arrival order, and no two threads ever touch a core.

The lease (litehit.lease.ShardLease) never makes a new owner crash-loop on a dead owner's lease.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

from litehit.db.models import OnlineGroup, OnlineInstance, OnlineShard, utcnow
from litehit.db.session import session_scope
from litehit.errors import AlreadyRegistered, ConfigError, ConfigIssue, NotShardOwner, UnknownInstance, WrongShard
from litehit.lease import Clock, Sessions, ShardLease, Sleep
from litehit.online.engine import OnlineInstance as LiveInstance
from litehit.online.engine import TraceQuery
from litehit.online.store import delete_instance, load_groups, load_instances, save_counters, shard_of
from litehit.settings import Settings
from litehit.spec import InstanceGroup, InstanceInfo, group_issues, instance_issues

__all__ = ["LEASE_S", "Clock", "Sessions", "ShardOwner", "Sleep"]

log = logging.getLogger("litehit.online")

LEASE_S = 15.0
"""A lease not renewed for this long is free for another process."""


class ShardOwner:
    """The live instances of shard ``settings.online_shard`` of ``settings.online_shards``."""

    def __init__(
        self,
        settings: Settings,
        *,
        sessions: Sessions | None = None,
        clock: Clock = utcnow,
        sleep: Sleep = time.sleep,
        lease_s: float = LEASE_S,
    ) -> None:
        self.shard, self.shards = settings.online_shard, settings.online_shards
        self.snapshot_every_s = settings.online_snapshot_s
        self.sessions: Sessions = sessions or partial(session_scope, settings.db_url)
        self.clock = clock
        self.lease = ShardLease(
            OnlineShard,
            "online shard",
            self.shard,
            self.shards,
            self.sessions,
            log,
            clock=clock,
            sleep=sleep,
            lease_s=lease_s,
        )
        self.lease_s = lease_s
        self.instances: dict[str, LiveInstance] = {}
        self.last_snapshot: datetime | None = None

    # The lease

    @property
    def name(self) -> str:
        return self.lease.name

    @property
    def leased(self) -> bool:
        return self.lease.held

    def claim(self) -> None:
        """Takes the lease of the shard (litehit.lease.ShardLease.claim)."""
        self.lease.claim("LITEHIT_ONLINE_SHARD")

    def renew(self) -> bool:
        """Renews the lease; once lost, the owner serves nothing until restarted. Safe to call
        from another thread than the one serving requests."""
        return self.lease.renew()

    def release(self) -> None:
        """At shutdown: a last snapshot, the lease given up, the cores freed. A database that
        cannot be reached loses the counters since the last snapshot and leaves the lease to
        expire (logged); it never stops the shutdown."""
        if self.leased:
            try:
                self.snapshot()
            except Exception as exc:
                log.error("online shard %d: the last counter snapshot failed: %s", self.shard, exc)
            self.lease.release()
        for inst in self.instances.values():
            inst.close()
        self.instances.clear()

    def require_lease(self) -> None:
        if not self.leased:
            raise NotShardOwner(f"this process no longer owns online shard {self.shard}")

    @property
    def housekeeping_s(self) -> float:
        """How often to renew the lease and check whether a snapshot is due."""
        return min(self.snapshot_every_s, self.lease_s / 3)

    # Counters in SQL

    def restore(self) -> None:
        """Rebuilds the shard's instances from SQL: configuration and last counters; the LRU
        state of each starts empty (its ``state_since`` says when)."""
        with self.sessions() as session:
            groups = load_groups(session)
            rows = load_instances(session, self.shard)
            for row in rows:
                info = InstanceInfo.model_validate(row.config)
                group = InstanceGroup.model_validate(groups[row.group_name])
                self.instances[row.instance_id] = LiveInstance(info, group, row.counters)
            self.last_snapshot = max((_aware(r.snapshot_at) for r in rows if r.snapshot_at), default=None)

    def start(self) -> None:
        """After claim(): the shard's instances, restored from SQL."""
        self.restore()

    def housekeep(self) -> None:
        """Now and then on the serving thread: a counter snapshot when one is due."""
        if self.snapshot_due():
            self.snapshot()

    def housekeep_in_thread(self) -> None:
        """Nothing of an online owner's housekeeping runs off the serving thread."""

    def snapshot_due(self) -> bool:
        return (
            self.last_snapshot is None or (self.clock() - self.last_snapshot).total_seconds() >= self.snapshot_every_s
        )

    def snapshot(self) -> None:
        """Stores the counters that changed since the last snapshot. Call it on the serving
        thread: counters must not change mid-snapshot."""
        now = self.clock()
        dirty = {i: inst.snapshot_state() for i, inst in self.instances.items() if inst.dirty}
        if dirty:
            with self.sessions() as session:
                save_counters(session, dirty, now)
            for i in dirty:
                self.instances[i].dirty = False
        self.last_snapshot = now

    # Groups and instances

    def create_group(self, group: InstanceGroup) -> dict[str, Any]:
        """CreateInstanceGroup: stored once in SQL, used by every shard."""
        with self.sessions() as session:
            issues = group_issues(group, "", set(load_groups(session)))
            if any(i.path == ".name" for i in issues):
                raise AlreadyRegistered(f"instance group {group.name!r} already exists")
            if not group.name:
                issues.insert(0, ConfigIssue("name", group.name, "the group name must not be empty"))
            if issues:
                raise ConfigError([ConfigIssue(i.path.lstrip("."), i.value, i.message) for i in issues])
            session.add(OnlineGroup(name=group.name, config=group.model_dump(mode="json")))
        data: dict[str, Any] = group.model_dump(mode="json")
        return data

    def groups(self) -> list[dict[str, Any]]:
        with self.sessions() as session:
            return [{"name": n, **c} for n, c in sorted(load_groups(session).items())]

    def register(self, info: InstanceInfo) -> dict[str, Any]:
        """RegisterInstance: the original rules, then the configuration in SQL and an empty core."""
        self.require_lease()
        with self.sessions() as session:
            groups = load_groups(session)
            issues = [
                ConfigIssue(i.path.lstrip("."), i.value, i.message) for i in instance_issues(info, set(groups), "")
            ]
            if issues:
                raise ConfigError(issues)
            self.check_shard(info.instance_id)
            if session.get(OnlineInstance, info.instance_id) is not None:
                raise AlreadyRegistered(f"instance {info.instance_id!r} already exists")
            live = LiveInstance(info, InstanceGroup.model_validate(groups[info.instance_group_name]))
            session.add(
                OnlineInstance(
                    instance_id=info.instance_id,
                    group_name=live.group.name,
                    shard=self.shard,
                    config=info.model_dump(mode="json"),
                    counters=live.counters.as_dict(),
                )
            )
            try:
                session.commit()
            except BaseException:
                live.close()
                raise
        self.instances[info.instance_id] = live
        return self.view(live)

    def remove(self, instance_id: str) -> dict[str, Any]:
        """Forgets an instance: its configuration, counters and core. Returns its last view."""
        inst = self.instance(instance_id)
        with self.sessions() as session:
            delete_instance(session, instance_id)
        view = self.view(inst)
        del self.instances[instance_id]
        inst.close()
        return view

    def check_shard(self, instance_id: str) -> None:
        """WrongShard unless this shard owns the instance id."""
        shard = shard_of(instance_id, self.shards)
        if shard != self.shard:
            raise WrongShard(f"instance {instance_id} belongs to shard {shard}")

    def instance(self, instance_id: str) -> LiveInstance:
        """The live instance; NotShardOwner, WrongShard or UnknownInstance otherwise."""
        self.require_lease()
        inst = self.instances.get(instance_id)
        if inst is None:
            self.check_shard(instance_id)
            raise UnknownInstance(f"no online instance with id {instance_id}")
        return inst

    def query(self, instance_id: str, queries: list[TraceQuery]) -> list[dict[str, Any]]:
        """Applies trace queries to one instance in order (RequestRejected: none applied)."""
        return self.instance(instance_id).query(queries)

    def view(self, inst: LiveInstance) -> dict[str, Any]:
        """ListInstances' entry of an instance."""
        return {**inst.summary(), "shard": self.shard, "snapshot_at": self.last_snapshot}

    def views(self) -> list[dict[str, Any]]:
        return [self.view(self.instances[i]) for i in sorted(self.instances)]


def _aware(stamp: datetime) -> datetime:
    """SQLite returns the stored UTC times without their zone."""
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
