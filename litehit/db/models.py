"""SQLAlchemy 2.x models. Alembic migrations in migrations/ create and remove them; nothing on a
production path calls create_all."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from litehit.db.states import JobState, LaneState, Stage

__all__ = [
    "AttributionShard",
    "Base",
    "Job",
    "JobPart",
    "OnlineGroup",
    "OnlineInstance",
    "OnlineShard",
    "PlanRow",
    "ProfileRow",
    "QuerySummary",
    "RouteRow",
    "StrEnumColumn",
    "TierRow",
    "Trace",
    "host_pid",
    "new_id",
    "utcnow",
]

E = TypeVar("E", bound=StrEnum)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


def host_pid() -> str:
    """This process as rows name it (the worker of a lane, the owner of an online shard)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class StrEnumColumn(TypeDecorator[E]):
    """A StrEnum stored as its value in a plain string column (no database enum type, so no
    migration); rows read back as enum members."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Dialect) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class Trace(Base):
    """An uploaded trace file in shared storage."""

    __tablename__ = "traces"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(String(1024))  # relative to the storage root
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    compression: Mapped[str] = mapped_column(String(16))  # none | gzip | zstd
    trace_format: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class Job(Base):
    """A job of any kind (litehit.jobs.kinds). The row is the source of truth; Celery messages
    are transient."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("kind", "idempotency_key", name="uq_jobs_idempotency"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(16), index=True)  # a litehit.jobs.kinds.Kind value
    state: Mapped[JobState] = mapped_column(StrEnumColumn(JobState, 16), index=True, default=JobState.QUEUED)
    stage: Mapped[Stage] = mapped_column(StrEnumColumn(Stage, 16), default=Stage.QUEUED)
    source: Mapped[str] = mapped_column(String(8), default="api")  # api | cli
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    request_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    trace_id: Mapped[str | None] = mapped_column(ForeignKey("traces.id"), nullable=True)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id"), nullable=True, index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    stats: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    output_path: Mapped[str | None] = mapped_column(String(1024), nullable=True)  # relative to storage
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    parts: Mapped[list[JobPart]] = relationship(
        back_populates="job", order_by="JobPart.part", cascade="all, delete-orphan"
    )
    profile_rows: Mapped[list[ProfileRow]] = relationship(
        back_populates="job", order_by="(ProfileRow.lane, ProfileRow.row)", cascade="all, delete-orphan"
    )
    tier_rows: Mapped[list[TierRow]] = relationship(back_populates="job", cascade="all, delete-orphan")
    plan_rows: Mapped[list[PlanRow]] = relationship(back_populates="job", cascade="all, delete-orphan")
    route_rows: Mapped[list[RouteRow]] = relationship(back_populates="job", cascade="all, delete-orphan")
    summaries: Mapped[list[QuerySummary]] = relationship(
        back_populates="job",
        order_by="(QuerySummary.is_total, QuerySummary.instance_id, QuerySummary.slot)",
        cascade="all, delete-orphan",
    )


class JobPart(Base):
    """One part of a job's parallel stage (a lane of a replay, a window sizing or a profile; a
    simulation of a policy sweep): its own row, so parallel tasks never write the same row.

    The claim columns (state .. finished_at) are the part's life, the same for every kind
    (litehit.jobs.state); ``plan``, ``progress`` and ``result`` hold the kind's own models
    (litehit.jobs.base: what the part is, how far it got, what it found)."""

    __tablename__ = "job_parts"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)  # its index in the job, from 0
    label: Mapped[str] = mapped_column(String(255))  # what messages name it by (a lane's instance_id)
    state: Mapped[LaneState] = mapped_column(StrEnumColumn(LaneState, 16), default=LaneState.QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)  # host:pid of the last attempt
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the kind's PartPlan
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # requests, blocks so far
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # the kind's part result

    job: Mapped[Job] = relationship(back_populates="parts")


class ProfileRow(Base):
    """The summary of one lane of a profile (category NULL) or of one request category of it."""

    __tablename__ = "profile_rows"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    lane: Mapped[int] = mapped_column(Integer, primary_key=True)
    row: Mapped[int] = mapped_column(Integer, primary_key=True)  # 0: the lane; then its categories
    instance_id: Mapped[str] = mapped_column(String(255))
    category: Mapped[str | None] = mapped_column(String(255), nullable=True)
    requests: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    hit_tokens: Mapped[int] = mapped_column(BigInteger)
    ideal_hit_ratio: Mapped[float] = mapped_column(Float)
    hit_token_share: Mapped[float] = mapped_column(Float)
    reuses: Mapped[int] = mapped_column(BigInteger)
    reuse_p50_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    reuse_p90_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    reuse_p99_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    exp_rate_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    ks: Mapped[float | None] = mapped_column(Float, nullable=True)
    keys: Mapped[int] = mapped_column(BigInteger)
    lifespan_p50_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    never_reused_share: Mapped[float] = mapped_column(Float)
    keys_for_90: Mapped[float] = mapped_column(Float)
    requests_for_90: Mapped[float] = mapped_column(Float)

    job: Mapped[Job] = relationship(back_populates="profile_rows")


class QuerySummary(Base):
    """One (instance, capacity slot) of a query job, or the total over instances."""

    __tablename__ = "query_summaries"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    is_total: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(255), primary_key=True)  # "" for the total
    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    capacity_gb: Mapped[float | None] = mapped_column(Float, nullable=True)  # NULL: blocks or tokens
    capacity: Mapped[str] = mapped_column(String(64), default="")  # as recorded: "1.0", "536870912B", "20000blocks"
    requests: Mapped[int] = mapped_column(BigInteger)
    total_input_tokens: Mapped[int] = mapped_column(BigInteger)
    total_hit_blocks: Mapped[int] = mapped_column(BigInteger)
    total_hit_tokens: Mapped[int] = mapped_column(BigInteger)
    hit_rate: Mapped[float] = mapped_column(Float)

    job: Mapped[Job] = relationship(back_populates="summaries")


class TierRow(Base):
    """One tier of a tier split's lane (category "": the lane; else one request category of it)."""

    __tablename__ = "tier_rows"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    lane: Mapped[str] = mapped_column(String(255), primary_key=True)  # its instance_id
    category: Mapped[str] = mapped_column(String(255), primary_key=True)
    tier: Mapped[int] = mapped_column(Integer, primary_key=True)  # 0: the first (HBM)
    name: Mapped[str] = mapped_column(String(64))
    capacity_blocks: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    requests: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    hit_blocks: Mapped[int] = mapped_column(BigInteger)
    hit_tokens: Mapped[int] = mapped_column(BigInteger)
    hit_rate: Mapped[float] = mapped_column(Float)
    cumulative_hit_rate: Mapped[float] = mapped_column(Float)
    bytes_loaded: Mapped[int] = mapped_column(BigInteger)

    job: Mapped[Job] = relationship(back_populates="tier_rows")


class RouteRow(Base):
    """One router of a routing what-if at one asked per-replica capacity (slot: its index)."""

    __tablename__ = "route_rows"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    router: Mapped[str] = mapped_column(String(32), primary_key=True)
    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)  # the router's place in the job's routers
    capacity: Mapped[str] = mapped_column(String(64))  # as asked
    capacity_blocks: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # null: unbounded
    hit_rate: Mapped[float] = mapped_column(Float)
    hit_tokens: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    max_over_mean: Mapped[float] = mapped_column(Float)
    p99_over_mean: Mapped[float] = mapped_column(Float)
    vs_round_robin: Mapped[float | None] = mapped_column(Float, nullable=True)

    job: Mapped[Job] = relationship(back_populates="route_rows")


class PlanRow(Base):
    """One configuration of a plan's lane: its best (rank 0, when one meets the target) or a point
    of its frontier (rank 1, 2, ... by cost)."""

    __tablename__ = "plan_rows"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    lane: Mapped[str] = mapped_column(String(255), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    tiers: Mapped[list[Any]] = mapped_column(JSON)  # [{"name", "capacity_blocks", "capacity", "capacity_bytes"}]
    total_capacity_blocks: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # null: a hybrid lane's bytes
    cost_per_hour: Mapped[float] = mapped_column(Float)
    hit_rate: Mapped[float] = mapped_column(Float)
    prefill_s: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    value: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # GPU-hours saved, value, net

    job: Mapped[Job] = relationship(back_populates="plan_rows")


class OnlineGroup(Base):
    """An online instance group (the original CreateInstanceGroup fields)."""

    __tablename__ = "online_groups"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class OnlineInstance(Base):
    """An online instance: its config, its shard, and the last snapshot of its counters."""

    __tablename__ = "online_instances"

    instance_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    group_name: Mapped[str] = mapped_column(ForeignKey("online_groups.name"), index=True)
    shard: Mapped[int] = mapped_column(Integer, index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    counters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    snapshot_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class OnlineShard(Base):
    """The lease of a shard: exactly one owner process may hold the state of its instances."""

    __tablename__ = "online_shards"

    shard: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AttributionShard(Base):
    """The lease of an attribution shard: exactly one owner process holds its workers' evidence."""

    __tablename__ = "attribution_shards"

    shard: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
