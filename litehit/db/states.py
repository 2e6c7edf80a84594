"""The names of job and lane states and of job stages. The database stores their values, plain
strings; the JSON of the API shows the same strings."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TERMINAL", "JobState", "LaneState", "Stage"]


class JobState(StrEnum):
    """Where a job is in its life: queued -> running -> succeeded | failed | cancelled."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
"""States a job never leaves."""


class Stage(StrEnum):
    """The step a job is at: a replay goes parse -> lanes -> merge, a query runs query; both end
    at done (a job that failed or was cancelled too)."""

    QUEUED = "queued"
    PARSE = "parse"
    LANES = "lanes"
    MERGE = "merge"
    QUERY = "query"
    DONE = "done"


class LaneState(StrEnum):
    """One lane of a replay: queued -> running -> succeeded | failed (running again when its
    worker was lost)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
