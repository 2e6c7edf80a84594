"""Request and response bodies of the HTTP API (pydantic). Replay requests reuse the replay
spec of the worker (the original offline config) so the service accepts existing configs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from litehit.db.states import JobState, LaneState, Stage
from litehit.policies.options import SweepOptions
from litehit.spec import ReplaySpec, Text
from litehit.window.options import WindowOptions

T = TypeVar("T")


class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description="path of the offending field")
    msg: str
    input: Any = None


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. not_found, validation_error, conflict")
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorResponse(BaseModel):
    error: ErrorBody


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class TracePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    path: str = Field(description="relative to the storage root; usable as trace_file_path")
    size_bytes: int
    sha256: str
    compression: str
    trace_format: str
    created_at: datetime


class ReplayCreate(ReplaySpec):
    """The original offline config, or the shorthand (as `litehit replay TRACE --block-sizes ...`):
    a trace plus any of ``block_sizes``, ``ttl_seconds``, ``model``/``kv_dtype``,
    ``kv_bytes_per_token``, ``block_bytes`` and ``prefix_hash``, standing for one lane per block
    size x TTL (then without ``instances``/``instance_groups``; ``block_size`` is the trace's block
    and ``trace_format`` is detected when not given). The trace is ``trace_id`` (an upload) or
    ``trace_file_path`` inside the storage root; the service publishes the facts under the job,
    so ``output_result_path`` is ignored."""

    trace_id: Text | None = None
    trace_file_path: Text = ""
    output_result_path: str = ""
    block_sizes: list[Annotated[int, Field(ge=1, le=2**31)]] | None = Field(
        default=None, min_length=1, description="shorthand: analysis block sizes, multiples of block_size"
    )
    ttl_seconds: list[Annotated[int, Field(ge=0, le=2**40)]] | None = Field(
        default=None, min_length=1, description="shorthand: one lane group per TTL (0 = pure LRU)"
    )
    model: Text | None = Field(default=None, description="shorthand: KV bytes per token from this model preset")
    kv_dtype: Literal["bf16", "fp16", "fp8"] | None = Field(default=None, description="shorthand: the model's KV type")
    kv_bytes_per_token: Annotated[int, Field(ge=1, le=2**40)] | None = Field(
        default=None, description="shorthand: KV-cache bytes of one token"
    )
    block_bytes: Annotated[int, Field(ge=1, le=2**50)] | None = Field(
        default=None, description="shorthand: KV-cache bytes of one trace block"
    )
    prefix_hash: bool | None = Field(default=None, description="shorthand: chain block hashes into prefix keys")


class LanePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    lane: int
    instance_id: str
    state: LaneState
    requests: int
    requests_total: int
    blocks: int
    blocks_total: int
    unique_blocks: int | None
    memory_bytes: int | None
    expired_blocks: int | None
    attempts: int
    worker: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class JobPublic(BaseModel):
    id: str
    kind: Literal["replay", "query", "policy_sweep", "window", "profile"]
    state: JobState
    stage: Stage
    source: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    attempts: int
    cancel_requested: bool
    progress: dict[str, Any]
    stats: dict[str, Any]
    spec: dict[str, Any]


class ReplayPublic(JobPublic):
    trace_id: str | None
    lanes: list[LanePublic]
    facts: dict[str, str] | None = Field(description="path (relative to storage) and URL of the published facts")


class PolicySweepCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root; lanes with a TTL are rejected) and what to simulate under ``sweep``."""

    sweep: SweepOptions


class SweepRunPublic(BaseModel):
    """One simulation: a lane under one policy at one capacity; results once succeeded."""

    run: int
    lane: int
    instance_id: str
    policy: str
    slot: int = Field(description="index in sweep.capacity_gb")
    capacity_gb: float
    capacity_blocks: int
    state: LaneState
    requests: int
    hit_blocks: int
    hit_tokens: int
    input_tokens: int
    hit_ratio: float | None
    evictions: int
    details: dict[str, Any] = Field(description="wa: what WA learnt; lru_check: the --verify-lru tally")
    attempts: int
    worker: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class PolicySweepPublic(JobPublic):
    trace_id: str | None
    runs: list[SweepRunPublic]
    links: dict[str, str]


class WindowCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root; lanes with a TTL are rejected) and the sizing under ``window``."""

    window: WindowOptions


class WindowLanePublic(BaseModel):
    """One lane simulated at the sizing's capacity; its summary once succeeded (the whole lane
    is in window.json)."""

    lane: int
    instance_id: str
    capacity_blocks: int
    state: LaneState
    requests: int
    evictions: int
    evicted: int = Field(description="misses whose first uncached block was evicted earlier")
    no_match: int = Field(description="misses whose first uncached block was never evicted at this lane")
    delay_count: int
    delay_p50: float | None
    delay_p90: float | None
    delay_p99: float | None
    delay_p999: float | None
    delay_max: float | None
    window_s: float | None = Field(description="W: the smallest window reaching the coverage target")
    peak_evictions_per_s: int | None = Field(description="E: the most evictions in one aligned second")
    memory_bytes: float | None = Field(description="E x W x entry_bytes / load_factor")
    attempts: int
    worker: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class WindowPublic(JobPublic):
    trace_id: str | None
    lanes: list[WindowLanePublic]
    links: dict[str, str]


class ProfileCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root); lanes with a TTL are profiled with their TTL."""


class ProfileLanePublic(BaseModel):
    """One lane of a profile; its whole entry is in profile.json once the job succeeded."""

    lane: int
    instance_id: str
    state: LaneState
    requests: int
    attempts: int
    worker: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class ProfileRowPublic(BaseModel):
    """The summary of one lane (category null) or one request category of it, from SQL."""

    lane: int
    instance_id: str
    category: str | None = Field(description="null: the lane as a whole")
    requests: int
    input_tokens: int
    hit_tokens: int
    ideal_hit_ratio: float = Field(description="hit tokens at infinite capacity (TTL applied) / input tokens")
    hit_token_share: float = Field(description="share of the lane's hit tokens")
    reuses: int = Field(description="hit blocks")
    reuse_p50_s: float | None
    reuse_p90_s: float | None
    reuse_p99_s: float | None
    exp_rate_per_s: float | None = Field(description="exponential fit of the reuse times: 1 / mean")
    ks: float | None = Field(description="Kolmogorov-Smirnov distance of the reuse times to that fit")
    keys: int = Field(description="unique keys (in a category: first accessed by it)")
    lifespan_p50_s: float | None
    never_reused_share: float
    keys_for_90: float = Field(description="smallest fraction of keys taking 90% of the reuses")
    requests_for_90: float = Field(description="smallest fraction of requests taking 90% of the hit tokens")


class ProfilePublic(JobPublic):
    trace_id: str | None
    lanes: list[ProfileLanePublic]
    summary: list[ProfileRowPublic] = Field(description="one row per lane and per lane x category, once succeeded")
    links: dict[str, str]


class QueryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replay_id: Text | None = Field(default=None, description="the replay whose facts to query")
    facts_path: Text | None = Field(default=None, description="or a facts file inside the storage root")
    capacity_gb: list[float | str] = Field(
        min_length=1,
        description="binary GiB (negative or inf = infinite), or a string with a unit: 512MiB, 1.5TiB, "
        "20000blocks, 1Mtokens",
    )
    targets: list[float] | None = Field(default=None, description="fractions of the infinite hit rate")


class SummaryPublic(BaseModel):
    instance_id: str | None
    requests: int
    total_input_tokens: int
    capacity_gb: list[float | None] = Field(description="GiB of each capacity (null: given in blocks or tokens)")
    capacities: list[str] = Field(description='each capacity as recorded: "2.0" (GiB), "536870912B", "20000blocks"')
    total_hit_blocks: list[int]
    total_hit_tokens: list[int]
    hit_rates: list[float]


class QueryPublic(JobPublic):
    replay_id: str | None
    instances: list[SummaryPublic]
    total: SummaryPublic | None
    links: dict[str, str]


class OnlineInstanceAddress(BaseModel):
    """The part of an online instance registration the public API reads to find the owner of
    the instance's shard; the owner checks the whole registration (InstanceInfo)."""

    model_config = ConfigDict(extra="allow")

    instance_id: str = ""
