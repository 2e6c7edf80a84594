"""The shape of ``window.json`` (a documented pydantic schema; ``WindowResult.model_json_schema()``).

Times are seconds (floats, from exact nanosecond integers); quantiles are nearest-rank; a miss is
a request with fewer prefix hits than complete blocks, described by its first uncached block.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from litehit.policies.result import PER_LANE_CAPACITY, drop_gib_capacity

__all__ = ["CoveragePoint", "DelayStats", "LaneWindow", "MissReport", "Outcomes", "WindowResult", "WindowSettings"]


class Outcomes(BaseModel):
    """Misses by the state of their first uncached block's key at this lane."""

    evicted: int = Field(description="the key was evicted earlier (and, if re-inserted, evicted again since)")
    no_match: int = Field(description="the key was never evicted at this lane: never seen, or a cold insert")


class DelayStats(BaseModel):
    """Delays of the evicted misses: request time - time of the key's latest eviction (the
    timestamp of the request whose commit evicted it). Nearest rank: the p-quantile of n sorted
    delays is the one at rank ceil(p x n). null when count is 0."""

    count: int = Field(description="evicted misses with a measured delay (eviction to the miss)")
    p50: float | None = Field(description="median delay from eviction to the miss, seconds")
    p90: float | None = Field(description="90th percentile of that delay, seconds")
    p99: float | None = Field(description="99th percentile of that delay, seconds")
    p999: float | None = Field(description="99.9th percentile of that delay, seconds")
    max: float | None = Field(description="longest such delay, seconds")


class CoveragePoint(BaseModel):
    window_s: float
    coverage: float = Field(description="share of the evicted misses with delay <= window_s")


class MissReport(BaseModel):
    """Outcomes, delays, coverage and the window of one set of requests (a category, or all lanes)."""

    requests: int
    outcomes: Outcomes
    delay_s: DelayStats
    coverage: list[CoveragePoint] = Field(
        description="coverage at fixed windows (0.1 s .. 1 day, then doubling), up to the first that covers all"
    )
    window_s: float = Field(
        description="the smallest window reaching the coverage target (= its nearest-rank quantile of the "
        "delays); 0 when there is no evicted miss"
    )


class LaneWindow(BaseModel):
    """One lane simulated at one capacity under one policy."""

    lane: str = Field(description="the instance_id")
    block_size: int
    block_bytes: int
    capacity_gb: float = Field(description="binary GiB (for a capacity in blocks or tokens: capacity_blocks' bytes)")
    capacity: str | None = Field(default=None, description=PER_LANE_CAPACITY)
    capacity_blocks: int = Field(
        description="trunc(capacity_gb x 1024^3 / block_bytes), the projector's rule; blocks as asked; "
        "tokens // block_size"
    )
    policy: str
    requests: int = Field(description="requests simulated")
    evictions: int = Field(description="blocks evicted")
    outcomes: Outcomes
    delay_s: DelayStats
    coverage: list[CoveragePoint]
    coverage_target: float
    window_s: float = Field(description="the smallest window reaching coverage_target (see MissReport)")
    bucket_s: float
    buckets: int = Field(description="ring size: ceil(window_s / bucket_s)")
    extra_retention_s: float = Field(description="worst case an entry outlives window_s: one bucket")
    peak_evictions_per_s: int = Field(
        description="E: the most evictions whose times fall in one aligned second (floor of the seconds)"
    )
    peak_second: int = Field(description="that second of trace time (the first reaching the peak)")
    memory_bytes: float = Field(description="E x window_s x entry_bytes / load_factor")
    memory_mib: float
    memory_bytes_15min: float = Field(description="the same for a 15-minute window, for comparison")
    memory_mib_15min: float
    categories: dict[str, MissReport] = Field(description="per request category (litehit.categories), in trace order")


class WindowSettings(BaseModel):
    policy: str
    capacity_gb: float | str = Field(description="as asked: binary GiB, or 20000blocks / 1000000tokens per lane")
    coverage_target: float
    entry_bytes: float
    load_factor: float
    bucket_s: float


class WindowResult(BaseModel):
    settings: WindowSettings
    lanes: list[LaneWindow]
    overall: MissReport = Field(description="every lane's misses together (each lane has its own E and memory)")

    def json_bytes(self) -> bytes:
        """window.json as written by the CLI."""
        data = self.model_dump(mode="json")
        drop_gib_capacity(data["lanes"])
        return json.dumps(data, indent=2).encode() + b"\n"
