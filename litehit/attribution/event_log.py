"""An attribution event log: one JSON document per line, in the order things happened, each
either a batch of one worker's KV events or a lookup::

    {"worker": "vllm-0", "epoch": "boot-1", "seq": 0, "ts": 1764561600.0, "events": [...]}
    {"lookup": {"worker": "vllm-0", "block_hash": 1002}, "ts": 1764561601.5}

A batch line is the HTTP event body (litehit.attribution.schemas.EventBatchBody) plus its worker,
with its ts required (the log's clock); a lookup is the HTTP lookup body (group, block_index and
lookup_limit included) and when it was asked;
`litehit attribution record` writes such lines from ZMQ publishers, and `litehit attribution
replay` runs a log through the same store the owner uses, with the lines' ts as the clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from litehit.attribution.answers import Lookup
from litehit.attribution.events import BlockEvent, EventBatch
from litehit.attribution.schemas import WORKER_PATTERN, EventBatchBody, LookupBody
from litehit.errors import TraceError

__all__ = ["LogBatch", "LogLookup", "batch_line", "read_event_log"]


class _BatchLine(EventBatchBody):
    worker: str = Field(pattern=WORKER_PATTERN, description="the worker whose events these are")
    ts: float = Field(allow_inf_nan=False, description="the worker's wall clock when it emitted the batch")


class _LookupLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lookup: LookupBody
    ts: float = Field(allow_inf_nan=False, description="when the lookup was asked, in seconds since 1970")


@dataclass(frozen=True, slots=True)
class LogBatch:
    line: int
    worker: str
    batch: EventBatch


@dataclass(frozen=True, slots=True)
class LogLookup:
    line: int
    lookup: Lookup
    ts: float

    @property
    def worker(self) -> str:
        return self.lookup.worker


def read_event_log(path: Path, name: str | None = None) -> Iterator[LogBatch | LogLookup]:
    """The log's lines in order; TraceError naming the file, the line and the field otherwise.
    Blank lines are skipped."""
    shown = name or str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TraceError(shown, 0, f"cannot open the event log: {exc.strerror or exc}") from None
    with handle:
        for n, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                doc = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                raise TraceError(shown, n, f"not a JSON document: {exc}") from None
            if not isinstance(doc, dict):
                raise TraceError(shown, n, "a line is a JSON object (an event batch or a lookup)")
            try:
                if "lookup" in doc:
                    item = _LookupLine.model_validate(doc)
                    yield LogLookup(n, item.lookup.lookup(), item.ts)
                else:
                    body = _BatchLine.model_validate(doc)
                    yield LogBatch(n, body.worker, body.batch(body.ts))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                raise TraceError(shown, n, f"{where}: {first['msg']}") from None


def batch_line(worker: str, batch: EventBatch) -> bytes:
    """One log line for a batch (what `record` writes)."""
    doc: dict[str, Any] = {
        "worker": worker,
        "epoch": batch.epoch,
        "seq": batch.seq,
        "ts": batch.ts,
        "events": [_event_doc(e) for e in batch.events],
    }
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _event_doc(e: BlockEvent) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": e.type.value, "block_hashes": list(e.block_hashes)}
    if e.group is not None:
        doc["group"] = e.group
    if e.group_kind is not None:
        doc["group_kind"] = e.group_kind
    return doc
