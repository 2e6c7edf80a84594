"""Request categories: who produces the reuse (workload profiles, the WA eviction policy).

The category of a request, by trace format:
- ``qwen_bailian``: ``type`` + ``-`` + turn bucket (``1``, ``2``, ``3+``), e.g. ``text-1``,
  ``image-3+``; a row without ``type`` is ``untyped``, a row without ``turn`` counts as turn 1;
- ``standard``: the row's optional string field ``category`` (``all`` when absent);
- ``mooncake`` and ``publisher_log``: ``all``.

Ids are given in order of first appearance in the trace, so they are the same in every pass.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from core_c.scan import ScanResult
from litehit.spec import TraceFormat

__all__ = ["ALL", "CategoryTable", "turn_bucket"]

ALL = "all"
UNTYPED = "untyped"
_TURN_BUCKETS = ("1", "2", "3+")


def turn_bucket(turn: int) -> str:
    """The turn bucket of a qwen row: 1 (also for a missing turn), 2, or 3+."""
    return _TURN_BUCKETS[min(max(turn, 1), 3) - 1]


class CategoryTable:
    """Category names and their ids, growing as a trace is read in order."""

    def __init__(self, names: list[str] | None = None) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}
        for name in names or []:
            self.id_of(name)

    def id_of(self, name: str) -> int:
        found = self._ids.get(name)
        if found is None:
            found = self._ids[name] = len(self.names)
            self.names.append(name)
        return found

    def ids_for(self, rows: ScanResult, fmt: TraceFormat) -> npt.NDArray[np.int32]:
        """The category id of every row of a scanned chunk."""
        n = len(rows.timestamp)
        if fmt is TraceFormat.QWEN_BAILIAN:
            bucket = np.clip(rows.turn, 1, 3) - 1
            local = (rows.label.astype(np.int64) + 1) * 3 + bucket  # label -1 (no type) -> 0..2
            labels = [UNTYPED, *rows.label_names]
            names = [f"{labels[code // 3]}-{_TURN_BUCKETS[code % 3]}" for code in range(3 * len(labels))]
        elif fmt is TraceFormat.STANDARD:
            local = rows.label.astype(np.int64) + 1  # label -1 (no category) -> 0
            names = [ALL, *rows.label_names]
        else:
            return np.full(n, self.id_of(ALL), dtype=np.int32)
        codes, inverse = np.unique(local, return_inverse=True)  # ids in order of first appearance
        first = np.full(len(codes), n, dtype=np.int64)
        np.minimum.at(first, inverse, np.arange(n))
        table = np.zeros(len(codes), dtype=np.int32)
        for k in np.argsort(first, kind="stable"):
            table[k] = self.id_of(names[int(codes[k])])
        ids: npt.NDArray[np.int32] = table[inverse.reshape(-1)]
        return ids
