"""The answers of live miss attribution, as every layer sees them: an outcome, the cause behind
it, and the lookup they answer. Plain Python (no engine): the API's schemas and metrics use them
without loading the evidence store (litehit.attribution.store), which makes them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTCOME_OF", "Attribution", "Cause", "Lookup", "Outcome", "not_probed"]


class Outcome(enum.StrEnum):
    RESIDENT = "resident"
    EVICTED = "evicted"
    NO_RECENT_MATCH = "no_recent_match"
    UNKNOWN = "unknown"
    NOT_A_MISS = "not_a_miss"  # the block lies at or beyond the engine's lookup limit: never probed


class Cause(enum.StrEnum):
    """Why an answer is what it is, as a short code (a metric label; ``reason`` says it in words)."""

    RESIDENT = "resident"  # resident: the block is there
    EVICTED = "evicted"  # evicted: removed by the engine within the window
    RESET = "reset"  # evicted: dropped by a prefix-cache reset (AllBlocksCleared) within the window
    ABSENT = "absent"  # no_recent_match: absent, and the window's evidence is complete
    BEYOND_LOOKUP_LIMIT = "beyond_lookup_limit"  # not_a_miss
    NO_EVENTS = "no_events"  # unknown: no events from this worker here
    OTHER_SHARD = "other_shard"  # unknown: the worker belongs to another shard
    DISCONNECTED = "disconnected"  # unknown: its event stream is disconnected
    PENDING = "pending"  # unknown: batches are held waiting for a missing one (reordering)
    LAG = "lag"  # unknown: consumer lag above max_lag_s
    GROUP_UNKNOWN = "group_unknown"  # unknown: which KV-cache group is meant cannot be established
    GAP = "gap"  # unknown: events were missed after the evidence, or within the window
    SHORT_HISTORY = "short_history"  # unknown: the epoch's history is shorter than the window
    RESIDENT_SET_UNKNOWN = "resident_set_unknown"  # unknown: the block may be resident unseen
    AGED = "aged"  # unknown: it may have been evicted before the retained window
    OWNER_UNREACHABLE = "owner_unreachable"  # unknown: the public API could not reach the owner


OUTCOME_OF: dict[Cause, Outcome] = {
    Cause.RESIDENT: Outcome.RESIDENT,
    Cause.EVICTED: Outcome.EVICTED,
    Cause.RESET: Outcome.EVICTED,
    Cause.ABSENT: Outcome.NO_RECENT_MATCH,
    Cause.BEYOND_LOOKUP_LIMIT: Outcome.NOT_A_MISS,
    **{
        c: Outcome.UNKNOWN
        for c in (
            Cause.NO_EVENTS,
            Cause.OTHER_SHARD,
            Cause.DISCONNECTED,
            Cause.PENDING,
            Cause.LAG,
            Cause.GROUP_UNKNOWN,
            Cause.GAP,
            Cause.SHORT_HISTORY,
            Cause.RESIDENT_SET_UNKNOWN,
            Cause.AGED,
            Cause.OWNER_UNREACHABLE,
        )
    },
}
"""The outcome of each cause: every cause belongs to exactly one outcome."""


@dataclass(frozen=True, slots=True)
class Attribution:
    """One answer; make it with :meth:`of` (the outcome follows from the cause)."""

    outcome: Outcome
    cause: Cause
    reason: str
    evicted_at: float | None = None
    group: int | None = None  # the KV-cache group the answer is about (None: not established)
    group_kind: str | None = None  # that group's kind, when its events declared it

    @staticmethod
    def of(
        cause: Cause,
        reason: str,
        *,
        evicted_at: float | None = None,
        group: int | None = None,
        group_kind: str | None = None,
    ) -> Attribution:
        return Attribution(OUTCOME_OF[cause], cause, reason, evicted_at, group, group_kind)

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "cause": self.cause.value,
            "reason": self.reason,
            "evicted_at": self.evicted_at,
            "group": self.group,
            "group_kind": self.group_kind,
        }


@dataclass(frozen=True, slots=True)
class Lookup:
    """One lookup: the worker, the hash of the request's first uncached block, the KV-cache group
    (None: the worker's full-attention group), and optionally that block's position in the request
    (``block_index``, 0 for the first block) with the number of blocks the engine probed
    (``lookup_limit``): a block at or beyond the limit was never looked up, so it is not a miss."""

    worker: str
    block_hash: int | bytes
    group: int | None = None
    block_index: int | None = None
    lookup_limit: int | None = None


def not_probed(q: Lookup) -> Attribution | None:
    """The answer when the lookup's block lies at or beyond the engine's lookup limit, else None."""
    if q.block_index is None or q.lookup_limit is None or q.block_index < q.lookup_limit:
        return None
    return Attribution.of(
        Cause.BEYOND_LOOKUP_LIMIT,
        f"block {q.block_index} is at or beyond the engine's lookup limit of {q.lookup_limit} blocks: the engine "
        "did not probe it (it recomputes the last prompt token on purpose), so it is not a miss",
        group=q.group,
    )
