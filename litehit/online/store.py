"""Online configuration and counters in SQL, and the shard lease that makes one process the
only owner of its instances' state. Every function takes the session (and the time) from its
caller: litehit.online.owner.ShardOwner."""

from __future__ import annotations

import zlib
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from litehit.db.models import OnlineGroup, OnlineInstance
from litehit.lease import claim_shard, lease_holder, release_shard

__all__ = [
    "claim_shard",
    "delete_instance",
    "lease_holder",
    "load_groups",
    "load_instances",
    "release_shard",
    "save_counters",
    "shard_of",
]


def shard_of(instance_id: str, shards: int) -> int:
    """The shard that owns an instance: stable across processes and restarts."""
    return zlib.crc32(instance_id.encode()) % max(shards, 1)


def save_counters(session: Session, counters: dict[str, dict[str, Any]], now: datetime) -> None:
    """Stores the counters of the given instances with the time of this snapshot. Commits."""
    for instance_id, values in counters.items():
        session.execute(
            update(OnlineInstance)
            .where(OnlineInstance.instance_id == instance_id)
            .values(counters=values, snapshot_at=now)
        )
    session.commit()


def load_groups(session: Session) -> dict[str, dict[str, Any]]:
    return {g.name: g.config for g in session.scalars(select(OnlineGroup))}


def load_instances(session: Session, shard: int) -> list[OnlineInstance]:
    return list(session.scalars(select(OnlineInstance).where(OnlineInstance.shard == shard)))


def delete_instance(session: Session, instance_id: str) -> None:
    session.execute(delete(OnlineInstance).where(OnlineInstance.instance_id == instance_id))
