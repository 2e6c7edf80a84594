"""The job kinds by name: each member of litehit.jobs.kinds.Kind is implemented by the module
``litehit.jobs.<value>``, whose ``KIND`` is the kind's declaration (litehit.jobs.base).

Everything that lists kinds reads them here: the Celery tasks (worker.tasks), the recovery sweep
(litehit.jobs.recovery), the HTTP routes and public schemas (api.routes.jobs, api.schemas), the
CLI's ``litehit jobs --kind`` and its run records (litehit.jobs.records).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from litehit.jobs.base import JobKind, TraceKind
from litehit.jobs.kinds import Kind

__all__ = ["job_kind", "kinds", "trace_kinds"]


@functools.cache
def job_kind(name: Kind | str) -> JobKind[Any]:
    """The declaration of a kind (ValueError for a name that is no kind)."""
    kind = Kind(name)
    module = importlib.import_module(f"litehit.jobs.{kind.value}")
    declared = getattr(module, "KIND", None)
    if not isinstance(declared, JobKind) or declared.kind is not kind:
        raise TypeError(f"litehit.jobs.{kind.value} must declare KIND, the JobKind of {kind.value!r}")
    return declared


def kinds() -> tuple[JobKind[Any], ...]:
    """Every kind, in the registry's order."""
    return tuple(job_kind(k) for k in Kind)


def trace_kinds() -> tuple[TraceKind[Any], ...]:
    """The kinds over a trace (parse, parts, merge)."""
    return tuple(k for k in kinds() if isinstance(k, TraceKind))
