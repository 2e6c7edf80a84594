"""The registry of job kinds: one member per kind.

A member's value is the kind's name everywhere (SQL, the API, the CLI's ``--kind``) and names the
module that implements it, ``litehit.jobs.<value>``, which declares ``KIND`` (litehit.jobs.base).
Adding a kind is that module and one line here; tasks, routes, schemas, recovery and run records
follow from the registry (litehit.jobs.registry).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Kind"]


class Kind(StrEnum):
    REPLAY = "replay"
    QUERY = "query"
    POLICY_SWEEP = "policy_sweep"
    WINDOW = "window"
    PROFILE = "profile"
    TIERS = "tiers"
    PLAN = "plan"
    ROUTES = "routes"
