"""Request and response bodies of the HTTP API (pydantic). Replay requests reuse the replay
spec of the worker (the original offline config) so the service accepts existing configs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from litehit.db.states import JobState, LaneState, Stage
from litehit.kv_models import assumed_kv_note
from litehit.policies.options import SweepOptions
from litehit.spec import ReplaySpec, Text
from litehit.window.options import WindowOptions

T = TypeVar("T")


class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description="path of the offending field")
    msg: str = Field(description="what is wrong there")
    input: Any = Field(default=None, description='the offending value (deep values cut to "...")')


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. not_found, validation_error, conflict")
    message: str = Field(description="human-readable summary")
    details: list[ErrorDetail] = Field(
        default_factory=list, description="one entry per offending field (validation errors)"
    )


class ErrorResponse(BaseModel):
    error: ErrorBody = Field(description="what went wrong")


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(description="this page's items")
    total: int = Field(description="items in all pages")
    limit: int = Field(description="the page size asked for")
    offset: int = Field(description="items skipped before this page")
    next_offset: int | None = Field(description="the offset of the next page (null: this is the last)")


class TracePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="the trace's id: trace_id of a job")
    name: str = Field(description="the file name given at upload")
    path: str = Field(description="relative to the storage root; usable as trace_file_path")
    size_bytes: int = Field(description="bytes uploaded (compressed, when compressed)")
    sha256: str = Field(description="SHA-256 of the uploaded bytes, hex")
    compression: str = Field(description="none, gzip or zstd")
    trace_format: str = Field(
        description="standard, mooncake, qwen_bailian or publisher_log (sniffed from the first row)"
    )
    created_at: datetime = Field(description="when the upload finished (UTC)")


class ReplayCreate(ReplaySpec):
    """The original offline config, or the shorthand (as `litehit replay TRACE --block-sizes ...`):
    a trace plus any of ``block_sizes``, ``ttl_seconds``, ``model``/``kv_dtype``,
    ``kv_bytes_per_token``, ``block_bytes`` and ``prefix_hash``, standing for one lane per block
    size x TTL (then without ``instances``/``instance_groups``; ``block_size`` is the trace's block
    and ``trace_format`` is detected when not given). The trace is ``trace_id`` (an upload) or
    ``trace_file_path`` inside the storage root; the service publishes the facts under the job,
    so ``output_result_path`` is ignored."""

    trace_id: Text | None = Field(
        default=None, description="an uploaded trace (POST /v1/traces); or give trace_file_path"
    )
    trace_file_path: Text = Field(
        default="", description="a trace file inside the storage root (relative to it); or give trace_id"
    )
    output_result_path: str = Field(default="", description="ignored: the service publishes the facts under the job")
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

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    state: LaneState = Field(
        description="queued -> running -> succeeded | failed (running again when its worker was lost)"
    )
    requests: int = Field(description="requests of the lane replayed so far")
    requests_total: int = Field(description="requests of the lane in the trace")
    blocks: int = Field(description="blocks of the lane replayed so far")
    blocks_total: int = Field(description="blocks of the lane in the trace")
    unique_blocks: int | None = Field(description="distinct block keys the lane saw (once succeeded)")
    memory_bytes: int | None = Field(description="memory the lane's engine used (once succeeded)")
    expired_blocks: int | None = Field(description="blocks dropped by the group's TTL (once succeeded)")
    attempts: int = Field(description="times a worker took this part (more than 1 after a lost worker)")
    worker: str | None = Field(description="host:pid of the worker of the last attempt")
    error: str | None = Field(description="why it failed, once failed")
    started_at: datetime | None = Field(description="when the last attempt started (UTC)")
    finished_at: datetime | None = Field(description="when it ended (UTC)")


class JobPublic(BaseModel):
    id: str = Field(description="the job's id (the {job_id} of its URLs)")
    kind: Literal["replay", "query", "policy_sweep", "window", "profile"] = Field(
        description="replay, query, policy_sweep, window or profile"
    )
    state: JobState = Field(description="queued -> running -> succeeded | failed | cancelled")
    stage: Stage = Field(
        description="the step the job is at: parse, lanes, simulate, size, profile, merge or query; done once it ended"
    )
    source: str = Field(description="who submitted it: api or cli")
    created_at: datetime = Field(description="when it was submitted (UTC)")
    started_at: datetime | None = Field(description="when a worker first took it (UTC)")
    finished_at: datetime | None = Field(description="when it ended (UTC)")
    error: str | None = Field(description="why it failed or was cancelled")
    attempts: int = Field(description="times a worker took the current stage (more than 1 after a lost worker)")
    cancel_requested: bool = Field(description="a cancel was asked (DELETE); running parts stop at their next check")
    progress: dict[str, Any] = Field(description="counters of the work done so far")
    stats: dict[str, Any] = Field(description="what the finished stages measured (rows, requests, blocks, ...)")
    spec: dict[str, Any] = Field(
        description="the request as validated and stored (the trace resolved inside the storage root)"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="one line when the job's replay assumed the default KV bytes (2 KiB per token: a shorthand "
        "without model, kv_bytes_per_token or block_bytes), else null"
    )
    @property
    def note(self) -> str | None:
        return assumed_kv_note(self.spec)


class ReplayPublic(JobPublic):
    trace_id: str | None = Field(
        description="the uploaded trace it runs on (null: a trace_file_path in the storage root)"
    )
    lanes: list[LanePublic] = Field(description="one row per lane: progress and outcome")
    facts: dict[str, str] | None = Field(description="path (relative to storage) and URL of the published facts")


class PolicySweepCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root; lanes with a TTL are rejected) and what to simulate under ``sweep``."""

    sweep: SweepOptions = Field(description="the policies and capacities to simulate")


class SweepRunPublic(BaseModel):
    """One simulation: a lane under one policy at one capacity; results once succeeded."""

    run: int = Field(description="index of the simulation in the job")
    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    policy: str = Field(description="lru, fifo, lfu, gdfs or wa")
    slot: int = Field(description="index in sweep.capacity_gb")
    capacity_gb: float = Field(description="the capacity in binary GiB")
    capacity_blocks: int = Field(description="the capacity in the lane's blocks")
    state: LaneState = Field(
        description="queued -> running -> succeeded | failed (running again when its worker was lost)"
    )
    requests: int = Field(description="requests simulated")
    hit_blocks: int = Field(description="blocks found in the cache")
    hit_tokens: int = Field(description="tokens of the hit blocks")
    input_tokens: int = Field(description="input tokens of the requests")
    hit_ratio: float | None = Field(description="hit_tokens / input_tokens (null before it succeeded)")
    evictions: int = Field(description="blocks evicted")
    details: dict[str, Any] = Field(description="wa: what WA learnt; lru_check: the --verify-lru tally")
    attempts: int = Field(description="times a worker took this part (more than 1 after a lost worker)")
    worker: str | None = Field(description="host:pid of the worker of the last attempt")
    error: str | None = Field(description="why it failed, once failed")
    started_at: datetime | None = Field(description="when the last attempt started (UTC)")
    finished_at: datetime | None = Field(description="when it ended (UTC)")


class PolicySweepPublic(JobPublic):
    trace_id: str | None = Field(
        description="the uploaded trace it runs on (null: a trace_file_path in the storage root)"
    )
    runs: list[SweepRunPublic] = Field(description="one row per simulation (lane x policy x capacity)")
    links: dict[str, str] = Field(description="URLs of its result files, once succeeded")


class WindowCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root; lanes with a TTL are rejected) and the sizing under ``window``."""

    window: WindowOptions = Field(description="the capacity, policy and coverage of the sizing")


class WindowLanePublic(BaseModel):
    """One lane simulated at the sizing's capacity; its summary once succeeded (the whole lane
    is in window.json)."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    capacity_blocks: int = Field(description="the sizing's capacity in the lane's blocks")
    state: LaneState = Field(
        description="queued -> running -> succeeded | failed (running again when its worker was lost)"
    )
    requests: int = Field(description="requests simulated")
    evictions: int = Field(description="blocks evicted")
    evicted: int = Field(description="misses whose first uncached block was evicted earlier")
    no_match: int = Field(description="misses whose first uncached block was never evicted at this lane")
    delay_count: int = Field(description="evicted misses with a measured delay (eviction to the miss)")
    delay_p50: float | None = Field(description="median delay from eviction to the miss, seconds")
    delay_p90: float | None = Field(description="90th percentile of that delay, seconds")
    delay_p99: float | None = Field(description="99th percentile of that delay, seconds")
    delay_p999: float | None = Field(description="99.9th percentile of that delay, seconds")
    delay_max: float | None = Field(description="longest such delay, seconds")
    window_s: float | None = Field(description="W: the smallest window reaching the coverage target")
    peak_evictions_per_s: int | None = Field(description="E: the most evictions in one aligned second")
    memory_bytes: float | None = Field(description="E x W x entry_bytes / load_factor")
    attempts: int = Field(description="times a worker took this part (more than 1 after a lost worker)")
    worker: str | None = Field(description="host:pid of the worker of the last attempt")
    error: str | None = Field(description="why it failed, once failed")
    started_at: datetime | None = Field(description="when the last attempt started (UTC)")
    finished_at: datetime | None = Field(description="when it ended (UTC)")


class WindowPublic(JobPublic):
    trace_id: str | None = Field(
        description="the uploaded trace it runs on (null: a trace_file_path in the storage root)"
    )
    lanes: list[WindowLanePublic] = Field(description="one row per lane")
    links: dict[str, str] = Field(description="URLs of its result files, once succeeded")


class ProfileCreate(ReplayCreate):
    """A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the
    storage root); lanes with a TTL are profiled with their TTL."""


class ProfileLanePublic(BaseModel):
    """One lane of a profile; its whole entry is in profile.json once the job succeeded."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    state: LaneState = Field(
        description="queued -> running -> succeeded | failed (running again when its worker was lost)"
    )
    requests: int = Field(description="requests profiled")
    attempts: int = Field(description="times a worker took this part (more than 1 after a lost worker)")
    worker: str | None = Field(description="host:pid of the worker of the last attempt")
    error: str | None = Field(description="why it failed, once failed")
    started_at: datetime | None = Field(description="when the last attempt started (UTC)")
    finished_at: datetime | None = Field(description="when it ended (UTC)")


class ProfileRowPublic(BaseModel):
    """The summary of one lane (category null) or one request category of it, from SQL."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    category: str | None = Field(description="null: the lane as a whole")
    requests: int = Field(description="requests of the lane or category")
    input_tokens: int = Field(description="their input tokens")
    hit_tokens: int = Field(description="their hit tokens at infinite capacity (TTL applied)")
    ideal_hit_ratio: float = Field(description="hit tokens at infinite capacity (TTL applied) / input tokens")
    hit_token_share: float = Field(description="share of the lane's hit tokens")
    reuses: int = Field(description="hit blocks")
    reuse_p50_s: float | None = Field(description="median reuse time of a block, seconds")
    reuse_p90_s: float | None = Field(description="90th percentile of the reuse times, seconds")
    reuse_p99_s: float | None = Field(description="99th percentile of the reuse times, seconds")
    exp_rate_per_s: float | None = Field(description="exponential fit of the reuse times: 1 / mean")
    ks: float | None = Field(description="Kolmogorov-Smirnov distance of the reuse times to that fit")
    keys: int = Field(description="unique keys (in a category: first accessed by it)")
    lifespan_p50_s: float | None = Field(description="median time from a key's first to last access, seconds")
    never_reused_share: float = Field(description="share of keys accessed once only")
    keys_for_90: float = Field(description="smallest fraction of keys taking 90% of the reuses")
    requests_for_90: float = Field(description="smallest fraction of requests taking 90% of the hit tokens")


class ProfilePublic(JobPublic):
    trace_id: str | None = Field(
        description="the uploaded trace it runs on (null: a trace_file_path in the storage root)"
    )
    lanes: list[ProfileLanePublic] = Field(description="one row per lane")
    summary: list[ProfileRowPublic] = Field(description="one row per lane and per lane x category, once succeeded")
    links: dict[str, str] = Field(description="URLs of its result files, once succeeded")


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
    instance_id: str | None = Field(description="the instance (null: all instances together)")
    requests: int = Field(description="requests queried")
    total_input_tokens: int = Field(description="their input tokens")
    capacity_gb: list[float | None] = Field(description="GiB of each capacity (null: given in blocks or tokens)")
    capacities: list[str] = Field(description='each capacity as recorded: "2.0" (GiB), "536870912B", "20000blocks"')
    total_hit_blocks: list[int] = Field(description="hit blocks at each capacity")
    total_hit_tokens: list[int] = Field(description="hit tokens at each capacity")
    hit_rates: list[float] = Field(description="total_hit_tokens / total_input_tokens at each capacity")


class SetupTotalPublic(SummaryPublic):
    """The total over the lanes of one setup (same block size, block bytes and TTL)."""

    block_size: int = Field(description="tokens per block of these lanes")
    block_bytes: int = Field(description="KV bytes of one block of these lanes")
    ttl_seconds: int = Field(description="their TTL (0: none)")
    instances: list[str] = Field(description="the lanes summed")


class QueryPublic(JobPublic):
    replay_id: str | None = Field(description="the replay whose facts are queried (null: a facts_path)")
    instances: list[SummaryPublic] = Field(description="one summary per instance")
    total: SummaryPublic | None = Field(
        description="all instances together, when they share one setup (block size, block bytes, TTL) or their "
        "setups are unknown (a facts_path); null under mixed setups and until the query succeeded"
    )
    totals: list[SetupTotalPublic] = Field(
        default_factory=list,
        description="one total per setup of the replay's lanes (lanes of different setups share no meaningful "
        "total); empty for a facts_path or until the query succeeded",
    )
    links: dict[str, str] = Field(description="URLs of the per-request JSONL, the curve and the plot, once succeeded")
