"""The lease that makes one process the only owner of a shard's live state (online instances,
attribution evidence): a row per shard in SQL, renewed by heartbeats, taken over when it expires.

Life of a lease: claim() -> renew() every few seconds -> release(). A lease left behind by a
holder that died (killed, or its database gone at shutdown) never makes the next owner
crash-loop: claim() takes it at once when it was held by an earlier process with this host name
and pid (a restarted container's pid 1), and otherwise waits for it to expire. Only a holder
whose heartbeat moves while we wait is alive.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from litehit.db.models import AttributionShard, OnlineShard, host_pid, new_id, utcnow

__all__ = ["Clock", "LeaseTable", "Sessions", "ShardLease", "Sleep", "claim_shard", "lease_holder", "release_shard"]

Sessions = Callable[[], AbstractContextManager[Session]]  # a session committed on success
Clock = Callable[[], datetime]  # aware UTC
Sleep = Callable[[float], None]
LeaseTable = type[OnlineShard] | type[AttributionShard]

_alive: set[str] = set()
"""The lease holders of this process: a lease named after this host and pid but not listed here
was left by an earlier process that had the same pid."""


def claim_shard(
    session: Session,
    shard: int,
    owner: str,
    lease_s: float,
    now: datetime,
    *,
    stale_owner: str | None = None,
    table: LeaseTable = OnlineShard,
) -> bool:
    """Takes or renews the lease of a shard; False if another live owner holds it. A lease not
    renewed for ``lease_s`` is free, and so is one held by ``stale_owner`` (a holder the caller
    knows is dead). Commits."""
    free = [table.owner == owner, table.heartbeat_at < now - timedelta(seconds=lease_s)]
    if stale_owner is not None:
        free.append(table.owner == stale_owner)
    result = session.execute(
        update(table)
        .where(table.shard == shard, or_(*free))
        .values(owner=owner, heartbeat_at=now)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        session.commit()
        return True
    if session.get(table, shard) is not None:
        session.rollback()
        return False
    session.add(table(shard=shard, owner=owner, heartbeat_at=now))
    try:
        session.commit()
    except IntegrityError:  # another owner created it at the same moment
        session.rollback()
        return False
    return True


def lease_holder(session: Session, shard: int, table: LeaseTable = OnlineShard) -> tuple[str, datetime] | None:
    """The owner of a shard's lease and its last heartbeat; None when nobody holds it."""
    row = session.get(table, shard, populate_existing=True)
    if not isinstance(row, OnlineShard | AttributionShard):
        return None
    return row.owner, row.heartbeat_at


def release_shard(session: Session, shard: int, owner: str, table: LeaseTable = OnlineShard) -> None:
    session.execute(delete(table).where(table.shard == shard, table.owner == owner))
    session.commit()


class ShardLease:
    """The lease of shard ``shard`` of ``shards`` in ``table``; ``what`` names the shard in
    messages ("online shard", "attribution shard"), logged to ``log``."""

    def __init__(
        self,
        table: LeaseTable,
        what: str,
        shard: int,
        shards: int,
        sessions: Sessions,
        log: logging.Logger,
        *,
        clock: Clock = utcnow,
        sleep: Sleep = time.sleep,
        lease_s: float = 15.0,
    ) -> None:
        self.table, self.what, self.shard, self.shards = table, what, shard, shards
        self.sessions, self.log = sessions, log
        self.clock, self.sleep, self.lease_s = clock, sleep, lease_s
        self.name = f"{host_pid()}:shard{shard}:{new_id()[:8]}"  # unique even for pid 1 in a container
        self.held = False

    def claim(self, setting: str) -> None:
        """Takes the lease, waiting (at most ``2 * lease_s``) for a dead owner's lease to expire.
        RuntimeError if the shard number (``setting`` names it) is out of range or another live
        process owns the shard: a holder of this process, or one whose heartbeat moves while we
        wait."""
        if not 0 <= self.shard < self.shards:
            raise RuntimeError(f"{setting}={self.shard} must be in [0, {self.shards})")
        poll_s = min(1.0, self.lease_s / 10)
        first: tuple[str, datetime] | None = None
        waited = 0.0
        while True:
            with self.sessions() as session:
                holder = lease_holder(session, self.shard, self.table)
                stale = holder[0] if holder is not None and self._left_by_earlier_process(holder[0]) else None
                if claim_shard(
                    session, self.shard, self.name, self.lease_s, self.clock(), stale_owner=stale, table=self.table
                ):
                    break
            if holder is None:  # released between our two statements: try again
                continue
            if holder[0] in _alive or (first is not None and holder != first) or waited >= 2 * self.lease_s:
                raise RuntimeError(f"{self.what} {self.shard} is already owned by a live process ({holder[0]})")
            if first is None:
                first = holder
                self.log.warning(
                    "%s %d is held by %s (heartbeat %s): waiting up to %.0f s for its lease to expire",
                    self.what,
                    self.shard,
                    holder[0],
                    holder[1].isoformat(),
                    self.lease_s,
                )
            self.sleep(poll_s)
            waited += poll_s
        if holder is not None:
            self.log.warning("took over the lease of %s %d from %s", self.what, self.shard, holder[0])
        self.held = True
        _alive.add(self.name)

    def _left_by_earlier_process(self, holder: str) -> bool:
        """A holder named after this host and pid that is not alive here died before us."""
        return holder.startswith(f"{host_pid()}:") and holder not in _alive

    def renew(self) -> bool:
        """Renews the lease; False once it is lost. Safe to call from any thread."""
        with self.sessions() as session:
            self.held = claim_shard(session, self.shard, self.name, self.lease_s, self.clock(), table=self.table)
        if not self.held:
            _alive.discard(self.name)
            self.log.error("lost the lease of %s %d: serving nothing until restarted", self.what, self.shard)
        return self.held

    def release(self) -> None:
        """Gives the lease up; a database that cannot be reached leaves it to expire (logged)."""
        if not self.held:
            return
        try:
            with self.sessions() as session:
                release_shard(session, self.shard, self.name, self.table)
        except Exception as exc:
            self.log.error("%s %d: could not release the lease (it expires by itself): %s", self.what, self.shard, exc)
        else:
            self.log.info("released the lease of %s %d", self.what, self.shard)
        self.held = False
        _alive.discard(self.name)

    @property
    def alive_here(self) -> bool:
        return self.name in _alive
