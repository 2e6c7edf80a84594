"""Fixed-capacity cache simulation under an eviction policy (lh_policy.h): the what-if seam.

**Usage**::

    with PolicySim("wa", capacity_blocks=4096, wa_refit_s=600.0) as sim:
        hits = sim.process_batch(keys, offsets, timestamps, categories)   # prefix hits per request
        sim.stats().wa_life_s

    with PolicySim("lru", 4096, miss_evidence=True) as sim:            # eviction evidence
        misses = sim.process_batch_misses(keys, offsets, timestamps, categories)
        misses.outcome, misses.miss_key, misses.evicted_at             # per request
        sim.stats().peak_evictions_per_s

Apart from the lane core: a simulator answers one capacity under one policy; the lane core
stays the only producer of facts. Not thread-safe: one thread owns a simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, ptr
from core_c._core import ffi, lib
from core_c._handle import CHandle
from core_c.errors import new_error_buffer, raise_for_status

__all__ = [
    "FULL_HIT",
    "MAX_CATEGORIES",
    "MISS_EVICTED",
    "MISS_NO_MATCH",
    "POLICIES",
    "MissBatch",
    "PolicySim",
    "PolicySimStats",
]

POLICIES: dict[str, int] = {
    "lru": int(lib.LH_POLICY_LRU),
    "fifo": int(lib.LH_POLICY_FIFO),
    "lfu": int(lib.LH_POLICY_LFU),
    "gdfs": int(lib.LH_POLICY_GDFS),
    "wa": int(lib.LH_POLICY_WA),
}
MAX_CATEGORIES = int(lib.LH_SIM_MAX_CATEGORIES)
FULL_HIT = int(lib.LH_SIM_FULL_HIT)  # request outcomes of process_batch_misses
MISS_EVICTED = int(lib.LH_SIM_MISS_EVICTED)
MISS_NO_MATCH = int(lib.LH_SIM_MISS_NO_MATCH)
_U64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class PolicySimStats:
    requests: int
    accesses: int
    hit_blocks: int
    inserts: int
    evictions: int
    resident: int
    memory_bytes: int
    wa_life_s: float | None  # WA: the horizon in use (or the one the first fit would fix)
    wa_fits: int
    wa_rates: list[float]  # WA: per category id, per second; 0.0 = not fitted
    wa_rate_all: float  # WA: per second; 0.0 = none yet
    peak_evictions_per_s: int  # the most evictions in one aligned second (floor of the request time)
    peak_second: int  # that second (the first reaching the peak)
    evicted_keys: int  # miss_evidence: distinct keys ever evicted


@dataclass(frozen=True, slots=True)
class MissBatch:
    """Per request of a batch (process_batch_misses): the prefix hits and the miss evidence.

    ``outcome`` is FULL_HIT, MISS_EVICTED or MISS_NO_MATCH; ``miss_key`` the first uncached
    block's key (0 for a full hit); ``evicted_at`` the time (ns) of that key's latest eviction
    (MISS_EVICTED only, else 0)."""

    hits: Int64Array
    outcome: npt.NDArray[np.int32]
    miss_key: Int64Array
    evicted_at: Int64Array


def _positive_seconds(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return value


class PolicySim(CHandle):
    """A cache of ``capacity_blocks`` blocks under ``policy`` (one of POLICIES).

    WA parameters: ``wa_life_s`` (None: derived at the first fit as the p90 of the reuse times
    seen before it), ``wa_fit_window_s`` and ``wa_refit_s`` (seconds, > 0). With
    ``record_evictions`` every batch's evictions are kept (``evictions()``); with ``miss_evidence``
    every evicted key's latest eviction time is, so ``process_batch_misses`` can tell an evicted
    first uncached block from one never evicted (memory: one entry per distinct evicted key).
    """

    def __init__(
        self,
        policy: str,
        capacity_blocks: int,
        *,
        wa_life_s: float | None = None,
        wa_fit_window_s: float = 3600.0,
        wa_refit_s: float = 600.0,
        record_evictions: bool = False,
        miss_evidence: bool = False,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown eviction policy {policy!r}; expected one of {', '.join(POLICIES)}")
        if isinstance(capacity_blocks, bool) or int(capacity_blocks) != capacity_blocks or capacity_blocks < 0:
            raise ValueError(f"capacity_blocks must be an integer >= 0, got {capacity_blocks!r}")
        self.policy = policy
        self.capacity_blocks = int(capacity_blocks)
        params = ffi.new("lh_wa_params *")
        params.life_s = 0.0 if wa_life_s is None else _positive_seconds("wa_life_s", wa_life_s)
        params.fit_window_s = _positive_seconds("wa_fit_window_s", wa_fit_window_s)
        params.refit_s = _positive_seconds("wa_refit_s", wa_refit_s)
        out = ffi.new("lh_sim **")
        err = new_error_buffer()
        status = lib.lh_sim_create(
            out,
            POLICIES[policy],
            min(self.capacity_blocks, _U64_MAX),
            params,
            (lib.LH_SIM_RECORD_EVICTIONS if record_evictions else 0)
            | (lib.LH_SIM_MISS_EVIDENCE if miss_evidence else 0),
            err,
            lib.LH_ERR_LEN,
        )
        raise_for_status(status, err)
        self._own(out[0], lib.lh_sim_destroy)

    def process_batch(
        self,
        keys: Int64Array,
        offsets: Int64Array,
        timestamps: Int64Array,
        categories: npt.NDArray[np.int32] | None = None,
    ) -> Int64Array:
        """Prefix hits of requests keys[offsets[i]:offsets[i+1]] at timestamps[i] (ns,
        non-decreasing) of category categories[i] (default 0), in order.

        On failure raises CoreError with ``index`` = the failing request and ``partial`` = the
        hits of the requests before it (which are committed); the failing one changed nothing.
        """
        return self._process(keys, offsets, timestamps, categories, misses=False).hits

    def process_batch_misses(
        self,
        keys: Int64Array,
        offsets: Int64Array,
        timestamps: Int64Array,
        categories: npt.NDArray[np.int32] | None = None,
    ) -> MissBatch:
        """process_batch, plus every request's miss evidence (needs ``miss_evidence=True``).
        Failures as process_batch (``partial`` = the hits before the failing request)."""
        return self._process(keys, offsets, timestamps, categories, misses=True)

    def _process(
        self,
        keys: Int64Array,
        offsets: Int64Array,
        timestamps: Int64Array,
        categories: npt.NDArray[np.int32] | None,
        *,
        misses: bool,
    ) -> MissBatch:
        handle = self._handle()
        keys, offsets, ts = as_int64(keys), as_int64(offsets), as_int64(timestamps)
        n = len(offsets) - 1
        if n < 0:
            raise ValueError("offsets needs at least one entry")
        if len(ts) != n:
            raise ValueError("timestamps must have one entry per request")
        if categories is None:
            cats = np.zeros(n, dtype=np.int32)
        else:
            cats = np.ascontiguousarray(categories, dtype=np.int32)
            if len(cats) != n:
                raise ValueError("categories must have one entry per request")
        per_request = n if misses else 0
        out = MissBatch(
            hits=np.zeros(n, dtype=np.int64),
            outcome=np.zeros(per_request, dtype=np.int32),
            miss_key=np.zeros(per_request, dtype=np.int64),
            evicted_at=np.zeros(per_request, dtype=np.int64),
        )
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        args = (
            handle,
            ptr("int64_t[]", keys) if len(keys) else ffi.NULL,
            len(keys),
            ptr("int64_t[]", offsets),
            ptr("int64_t[]", ts) if n else ffi.NULL,
            ptr("int32_t[]", cats) if n else ffi.NULL,
            n,
            ptr("int64_t[]", out.hits) if n else ffi.NULL,
        )
        if misses:
            evidence = (
                ptr("int32_t[]", out.outcome) if n else ffi.NULL,
                ptr("int64_t[]", out.miss_key) if n else ffi.NULL,
                ptr("int64_t[]", out.evicted_at) if n else ffi.NULL,
            )
            status = lib.lh_sim_process_batch_misses(*args, *evidence, n_done, err, lib.LH_ERR_LEN)
        else:
            status = lib.lh_sim_process_batch(*args, n_done, err, lib.LH_ERR_LEN)
        done = int(n_done[0])
        raise_for_status(status, err, index=done, partial=out.hits[:done])
        return out

    def evictions(self) -> tuple[Int64Array, Int64Array]:
        """The last batch's evictions: victim keys and the index of the evicting request
        (empty unless created with record_evictions)."""
        keys_p = ffi.new("int64_t **")
        reqs_p = ffi.new("int64_t **")
        n = int(lib.lh_sim_evictions(self._handle(), keys_p, reqs_p))
        if n == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        keys = np.frombuffer(ffi.buffer(keys_p[0], 8 * n), dtype=np.int64).copy()
        reqs = np.frombuffer(ffi.buffer(reqs_p[0], 8 * n), dtype=np.int64).copy()
        return keys, reqs

    def stats(self) -> PolicySimStats:
        handle = self._handle()
        raw = ffi.new("lh_sim_stats *")
        lib.lh_sim_get_stats(handle, raw)
        wa = self.policy == "wa"
        return PolicySimStats(
            requests=int(raw.requests),
            accesses=int(raw.accesses),
            hit_blocks=int(raw.hit_blocks),
            inserts=int(raw.inserts),
            evictions=int(raw.evictions),
            resident=int(raw.resident),
            memory_bytes=int(raw.memory_bytes),
            wa_life_s=float(raw.wa_life_s) if wa else None,
            wa_fits=int(raw.wa_fits),
            wa_rates=[float(lib.lh_sim_wa_rate(handle, c)) for c in range(int(raw.wa_categories))],
            wa_rate_all=float(raw.wa_rate_all),
            peak_evictions_per_s=int(raw.peak_evictions_per_s),
            peak_second=int(raw.peak_second),
            evicted_keys=int(raw.evicted_keys),
        )

    def check(self) -> None:
        """Verifies internal invariants (tests); raises CoreInvalidArgument on a violation."""
        err = new_error_buffer()
        raise_for_status(lib.lh_sim_check(self._handle(), err, lib.LH_ERR_LEN), err)
