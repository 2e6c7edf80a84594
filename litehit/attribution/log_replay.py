"""Runs an attribution event log (litehit.attribution.event_log) through the owner's store:
the batches are applied and the lookups answered in log order, with the lines' ts as both the
monotonic and the wall clock (the largest ts so far: a line stamped earlier than one before it
never moves the clock back), so a recorded stream gives the answers the live owner would have
given with no consumer lag."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from litehit.attribution.event_log import LogBatch, LogLookup
from litehit.attribution.store import Attribution, AttributionStore, Lookup

__all__ = ["LogAnswer", "LogReplay"]


@dataclass(frozen=True, slots=True)
class LogAnswer:
    line: int
    lookup: Lookup
    ts: float
    attribution: Attribution

    @property
    def worker(self) -> str:
        return self.lookup.worker

    def as_dict(self) -> dict[str, Any]:
        q = self.lookup
        asked = {"block_index": q.block_index, "lookup_limit": q.lookup_limit}  # the group is in the answer
        return {
            "line": self.line,
            "worker": q.worker,
            "block_hash": q.block_hash,
            **{k: v for k, v in asked.items() if v is not None},
            "ts": self.ts,
            **self.attribution.as_dict(),
        }


class LogReplay:
    def __init__(
        self, *, window_s: float, bucket_s: float, max_lag_s: float, filter_bits: int, reorder_grace_s: float = 0.0
    ) -> None:
        self.now: float | None = None
        self.store = AttributionStore(
            window_s=window_s,
            bucket_s=bucket_s,
            max_lag_s=max_lag_s,
            filter_bits=filter_bits,
            reorder_grace_s=reorder_grace_s,
            clock=self._clock,
            wall=self._clock,
        )

    def _clock(self) -> float:
        return 0.0 if self.now is None else self.now

    def run(self, items: Iterable[LogBatch | LogLookup]) -> Iterator[LogAnswer]:
        """Applies every batch and yields every lookup's answer, in log order."""
        for item in items:
            ts = item.batch.ts if isinstance(item, LogBatch) else item.ts
            if self.now is None:  # the first line starts the store's clock
                self.now = ts
                self.store.t0 = ts
            self.now = max(self.now, ts)
            if isinstance(item, LogBatch):
                self.store.apply(item.worker, item.batch)
            else:
                (answer,) = self.store.lookup_many([item.lookup])
                yield LogAnswer(item.line, item.lookup, item.ts, answer)

    def close(self) -> None:
        self.store.close()
