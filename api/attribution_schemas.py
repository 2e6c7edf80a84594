"""Bodies of the attribution routes (litehit.attribution.schemas) and the worker of their paths."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from litehit.attribution.schemas import (
    WORKER_PATTERN,
    AttributionResult,
    EventBatchBody,
    EventBody,
    LookupBatch,
    LookupBody,
)

__all__ = ["AttributionResult", "EventBatchBody", "EventBody", "LookupBatch", "LookupBody", "WorkerName"]

WorkerName = Annotated[
    str,
    Path(
        pattern=WORKER_PATTERN,
        description="the worker (engine replica) whose events these are: letters, digits and _ . : -",
        examples=["vllm-0"],
    ),
]
