"""Online configuration and counters in SQL, and the shard lease that makes one process the
only owner of its instances' state. Every function takes the session (and the time) from its
caller: litehit.online.owner.ShardOwner."""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from litehit.db.models import OnlineGroup, OnlineInstance, OnlineShard

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


def claim_shard(
    session: Session, shard: int, owner: str, lease_s: float, now: datetime, *, stale_owner: str | None = None
) -> bool:
    """Takes or renews the lease of a shard; False if another live owner holds it. A lease not
    renewed for ``lease_s`` is free, and so is one held by ``stale_owner`` (a holder the caller
    knows is dead). Commits."""
    free = [OnlineShard.owner == owner, OnlineShard.heartbeat_at < now - timedelta(seconds=lease_s)]
    if stale_owner is not None:
        free.append(OnlineShard.owner == stale_owner)
    result = session.execute(
        update(OnlineShard)
        .where(OnlineShard.shard == shard, or_(*free))
        .values(owner=owner, heartbeat_at=now)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        session.commit()
        return True
    if session.get(OnlineShard, shard) is not None:
        session.rollback()
        return False
    session.add(OnlineShard(shard=shard, owner=owner, heartbeat_at=now))
    try:
        session.commit()
    except IntegrityError:  # another owner created it at the same moment
        session.rollback()
        return False
    return True


def lease_holder(session: Session, shard: int) -> tuple[str, datetime] | None:
    """The owner of a shard's lease and its last heartbeat; None when nobody holds it."""
    row = session.get(OnlineShard, shard, populate_existing=True)
    return None if row is None else (row.owner, row.heartbeat_at)


def release_shard(session: Session, shard: int, owner: str) -> None:
    session.execute(delete(OnlineShard).where(OnlineShard.shard == shard, OnlineShard.owner == owner))
    session.commit()


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
