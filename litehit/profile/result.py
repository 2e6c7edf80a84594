"""The shape of ``profile.json`` (a documented pydantic schema: ``ProfileResult.model_json_schema()``,
printed by ``litehit profile --schema``).

Everything is per lane, at the lane's block granularity and infinite capacity with the lane's TTL:
a *hit* is a block of a request's prefix hit at infinite capacity (an expired block is a miss), and
a *reuse* is one hit block, credited to its key. Times are seconds (floats from exact integer
nanoseconds); quantiles are nearest rank (the smallest value v with at least ceil(q x n) values
<= v). A statistic of an empty set is null, never NaN.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

__all__ = [
    "PLOT_NAMES",
    "CapacityPoint",
    "Histogram",
    "LaneProfile",
    "Lifespan",
    "Metrics",
    "OverallMetrics",
    "ProfileResult",
    "ReuseTime",
    "Skew",
    "WorkingSet",
]

PLOT_NAMES = ("reuse_time", "lifespan", "hit_share", "working_set")
"""The profile's pictures (litehit.profile.plot draws them), each as <name>.png and <name>.svg."""


class Histogram(BaseModel):
    """Counts on log-spaced bins (for plots): ``zero`` values equal to 0, then counts[i] values in
    [edges_s[i], edges_s[i+1]) (the last bin includes its right edge)."""

    zero: int
    edges_s: list[float]
    counts: list[int]


class ReuseTime(BaseModel):
    """Per hit block: the time since the latest access of its key by an EARLIER request (the
    state the hit was judged against), grouped by the category of the hitting request."""

    count: int = Field(description="reuses (hit blocks)")
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None
    exp_rate_per_s: float | None = Field(
        description="maximum-likelihood exponential fit: 1 / mean_s (null when there is no reuse or mean_s is 0)"
    )
    ks: float | None = Field(
        description="Kolmogorov-Smirnov distance between the empirical CDF and the exponential fit "
        "(null when exp_rate_per_s is)"
    )
    histogram: Histogram


class Lifespan(BaseModel):
    """Per unique key: time of its last access - time of its first (an access = a request
    containing the key); in a category, the keys first accessed by that category's requests."""

    keys: int
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    never_reused_share: float = Field(description="share of the keys contained in exactly one request")
    histogram: Histogram


class Skew(BaseModel):
    """How concentrated the reuse is. keys_for_X: the smallest fraction of keys whose reuses reach X%
    of all reuses (keys sorted by reuse count, descending); overall over every unique key of the
    lane, in a category over the keys that category's reuses hit. requests_for_90: the smallest
    fraction of requests whose hit tokens reach 90% of all hit tokens. 0 when nothing is reused."""

    keys_for_50: float
    keys_for_77: float
    keys_for_90: float
    requests_for_90: float


class Metrics(BaseModel):
    """One lane, or one request category of it."""

    requests: int = Field(description="requests profiled")
    input_tokens: int = Field(description="their input tokens")
    blocks: int = Field(description="complete blocks")
    hit_blocks: int = Field(description="prefix hit blocks at infinite capacity (TTL applied)")
    hit_tokens: int = Field(description="hit_blocks x block_size")
    ideal_hit_ratio: float = Field(description="hit_tokens / input_tokens (0 without input)")
    hit_token_share: float = Field(description="share of the lane's hit tokens (0 when the lane has none)")
    multi_turn_share: float | None = Field(
        description="share of requests with turn >= 2 (qwen_bailian traces; null for formats without turns)"
    )
    reuse_time: ReuseTime
    lifespan: Lifespan
    skew: Skew


class CapacityPoint(BaseModel):
    """The smallest capacity whose hit blocks reach the fraction of the infinite-capacity hit blocks."""

    blocks: int
    bytes: int


class WorkingSet(BaseModel):
    """Distinct keys accessed in each aligned window of trace time (floor(t / window)), over every
    window from the lane's first request to its last (windows without requests count as 0)."""

    window_s: float
    windows: int
    max: int
    p50: int
    series: list[tuple[float, int]] = Field(
        description="[window start (s, trace time), distinct keys] of every window that saw a request"
    )


class OverallMetrics(Metrics):
    capacity: dict[str, CapacityPoint] = Field(
        description='"50", "90", "99": the capacity reaching that % of the ideal hit ratio (LRU, exact)'
    )
    working_set_60s: WorkingSet


class LaneProfile(BaseModel):
    lane: str = Field(description="the instance_id")
    block_size: int
    block_bytes: int
    ttl_s: float | None = Field(description="the lane's TTL (null: none)")
    overall: OverallMetrics
    categories: dict[str, Metrics] = Field(description="every request category with requests in the lane")


class ProfileResult(BaseModel):
    trace_format: str
    lanes: list[LaneProfile]

    def json_bytes(self) -> bytes:
        """profile.json: the same bytes from the CLI and the service."""
        return (json.dumps(self.model_dump(mode="json"), indent=2, allow_nan=False) + "\n").encode()
