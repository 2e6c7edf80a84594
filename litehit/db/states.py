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
    """The step a job is at: a replay goes parse -> lanes -> merge, a policy sweep parse ->
    simulate -> merge, a window sizing parse -> size -> merge, a workload profile parse ->
    profile -> merge, a query runs query; all end at done (a job that failed or was cancelled too)."""

    QUEUED = "queued"
    PARSE = "parse"
    LANES = "lanes"
    SIMULATE = "simulate"
    SIZE = "size"
    PROFILE = "profile"
    MERGE = "merge"
    QUERY = "query"
    DONE = "done"


class LaneState(StrEnum):
    """One part of a job's parallel stage (a lane of a replay or of a window sizing, a
    simulation of a sweep):
    queued -> running -> succeeded | failed (running again when its worker was lost)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
