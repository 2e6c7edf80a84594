"""One worker's eviction evidence (lh_evidence.h): resident digests, the latest retained removal
of each removed digest (by batch number), and a Bloom filter of digests whose evidence aged out.

**Usage**::

    with EvidenceSet(ring_buckets=13, filter_log2_bits=23) as ev:
        ev.advance(bucket)                        # the current time bucket (never backwards)
        ev.apply(batch, kinds, offsets, digests)  # one batch: STORED / REMOVED / CLEARED events
        kinds, batches = ev.lookup(digests)       # ABSENT / RESIDENT / REMOVED / AGED per digest
        while ev.sweep(65536): ...                # a timer: expired evidence out, in steps
        ev.trim()                                 # and its memory given back
        ev.forget()                               # a restart: everything known becomes "aged"

It never sees a clock: litehit.attribution.store numbers the batches and buckets. Not
thread-safe: one thread at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, ptr
from core_c._core import ffi, lib
from core_c._handle import CHandle
from core_c.errors import new_error_buffer, raise_for_status

__all__ = [
    "ABSENT",
    "AGED",
    "CLEARED",
    "MAX_BATCH",
    "MAX_BUCKET",
    "REMOVED",
    "REMOVED_EVENT",
    "RESIDENT",
    "STORED",
    "EvidenceSet",
    "EvidenceStats",
]

STORED, REMOVED_EVENT, CLEARED = 0, 1, 2  # event kinds
ABSENT: int = lib.LH_EVIDENCE_ABSENT  # lookup kinds
RESIDENT: int = lib.LH_EVIDENCE_RESIDENT
REMOVED: int = lib.LH_EVIDENCE_REMOVED
AGED: int = lib.LH_EVIDENCE_AGED
MAX_BATCH: int = lib.LH_EVIDENCE_MAX_BATCH
MAX_BUCKET: int = lib.LH_EVIDENCE_MAX_BUCKET


@dataclass(frozen=True, slots=True)
class EvidenceStats:
    resident: int
    evidence: int
    expired: int
    filter_bits: int
    filter_set: int
    previous_set: int
    filter_inserts: int
    generation_inserts: int
    rotations: int
    resident_bytes: int
    evidence_bytes: int
    filter_bytes: int
    bucket: int
    last_batch: int

    @property
    def filter_false_positive_rate(self) -> float:
        """The chance that a digest never put into the filter tests positive now: for its three
        probes, (set bits / bits) ** 3 in either generation."""
        if not self.filter_bits:
            return 0.0
        current, previous = (self.filter_set / self.filter_bits) ** 3, (self.previous_set / self.filter_bits) ** 3
        return 1 - (1 - current) * (1 - previous)


class EvidenceSet(CHandle):
    def __init__(self, ring_buckets: int, filter_log2_bits: int, filter_generation: int = 0) -> None:
        out = ffi.new("lh_evidence **")
        err = new_error_buffer()
        if not 0 <= filter_generation < 2**64:
            raise ValueError(f"filter_generation must be in [0, 2**64), got {filter_generation}")
        status = lib.lh_evidence_create(out, ring_buckets, filter_log2_bits, filter_generation, err, lib.LH_ERR_LEN)
        raise_for_status(status, err)
        self._own(out[0], lib.lh_evidence_destroy)

    def advance(self, bucket: int) -> None:
        """Moves the current bucket forward (0 <= bucket; a smaller one than now is ignored)."""
        handle = self._handle()
        if bucket < 0:
            raise ValueError(f"bucket must be >= 0, got {bucket}")
        lib.lh_evidence_advance(handle, min(bucket, MAX_BUCKET))

    def apply(self, batch: int, kinds: npt.NDArray[np.uint8], offsets: Int64Array, digests: Int64Array) -> None:
        """One batch (see lh_evidence_apply): all applied, or CoreError and nothing changed."""
        handle = self._handle()
        if not 0 <= batch < 2**32:  # the C function checks the rest
            raise ValueError(f"batch must be in [1, {MAX_BATCH}], got {batch}")
        kinds = np.ascontiguousarray(kinds, dtype=np.uint8)
        offsets, digests = as_int64(offsets), as_int64(digests)
        if len(offsets) != len(kinds) + 1 or (len(kinds) and offsets[-1] != len(digests)):
            raise ValueError("offsets must have one entry per event plus one, ending at len(digests)")
        err = new_error_buffer()
        status = lib.lh_evidence_apply(
            handle,
            batch,
            ptr("const uint8_t *", kinds),
            ptr("const int64_t *", offsets),
            len(kinds),
            ptr("const int64_t *", digests),
            err,
            lib.LH_ERR_LEN,
        )
        raise_for_status(status, err)

    def lookup(self, digests: Int64Array) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
        handle = self._handle()
        digests = as_int64(digests)
        kinds = np.empty(len(digests), dtype=np.uint8)
        batches = np.empty(len(digests), dtype=np.uint32)
        lib.lh_evidence_lookup(
            handle,
            ptr("const int64_t *", digests),
            len(digests),
            ptr("uint8_t *", kinds),
            ptr("uint32_t *", batches),
        )
        return kinds, batches

    def sweep(self, budget: int) -> int:
        """Continues the expiry sweep over at most ``budget`` slots; returns the slots it still has
        to examine (0: every expired entry is out of the table)."""
        handle = self._handle()
        if budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        left: int = lib.lh_evidence_sweep(handle, budget)
        return left

    def trim(self) -> None:
        """Gives memory back: a table at most a quarter full shrinks, an empty one is freed (see
        lh_evidence_trim). CoreError (out of memory) leaves a table at its size."""
        handle = self._handle()
        err = new_error_buffer()
        raise_for_status(lib.lh_evidence_trim(handle, err, lib.LH_ERR_LEN), err)

    def forget(self) -> None:
        lib.lh_evidence_forget(self._handle())

    def stats(self, *, settle: bool = True) -> EvidenceStats:
        """Counts and sizes; ``settle`` first finishes the expiry sweep (exact counts, a scan of
        the table), without it ``evidence`` includes expired entries not swept out yet."""
        raw: Any = ffi.new("lh_evidence_stats *")
        lib.lh_evidence_get_stats(self._handle(), int(settle), raw)
        return EvidenceStats(
            resident=raw.resident,
            evidence=raw.evidence,
            expired=raw.expired,
            filter_bits=raw.filter_bits,
            filter_set=raw.filter_set,
            previous_set=raw.previous_set,
            filter_inserts=raw.filter_inserts,
            generation_inserts=raw.generation_inserts,
            rotations=raw.rotations,
            resident_bytes=raw.resident_bytes,
            evidence_bytes=raw.evidence_bytes,
            filter_bytes=raw.filter_bytes,
            bucket=raw.bucket,
            last_batch=raw.last_batch,
        )
