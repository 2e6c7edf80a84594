"""The routing simulator (lh_route.h): N fixed-capacity LRU replicas and a router that reads their
state (cache contents, the load window) before every request. A what-if on the policy seam, not a
facts producer.

**Usage**::

    with RouteSim("cache_aware", replicas=8, capacity_blocks=20000, block_size=16,
                  window_ns=10 * 10**9, threshold=Fraction(1, 10)) as sim:
        replica, hits = sim.process_batch(keys, offsets, timestamps, input_lens)

Not thread-safe: one thread owns a simulator.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from core_c._arrays import Int64Array, as_int64, ptr
from core_c._core import ffi, lib
from core_c._handle import CHandle
from core_c.errors import new_error_buffer, raise_for_status

__all__ = ["MAX_REPLICAS", "ROUTERS", "THRESHOLD_DEN_MAX", "RouteSim"]

ROUTERS: dict[str, int] = {"least_loaded": int(lib.LH_ROUTE_LEAST_LOADED), "cache_aware": int(lib.LH_ROUTE_CACHE_AWARE)}
MAX_REPLICAS = int(lib.LH_ROUTE_MAX_REPLICAS)
THRESHOLD_DEN_MAX = 1 << 40
_U64_MAX = 2**64 - 1


class RouteSim(CHandle):
    """``replicas`` LRU caches of ``capacity_blocks`` blocks each (2^64 - 1: unbounded) behind
    ``router`` (one of ROUTERS); load = prefill tokens (input - hits x block_size) in the window
    (t - window_ns, t]; ``threshold`` is cache_aware's balance threshold, an exact fraction;
    ``ttl_ns`` (0: none): a block last accessed that long before a request is no hit."""

    def __init__(
        self,
        router: str,
        *,
        replicas: int,
        capacity_blocks: int,
        block_size: int,
        window_ns: int,
        threshold: Fraction = Fraction(0),
        ttl_ns: int = 0,
    ) -> None:
        if router not in ROUTERS:
            raise ValueError(f"unknown router {router!r}; expected one of {', '.join(ROUTERS)}")
        threshold = Fraction(threshold)
        if threshold < 0 or threshold.denominator > THRESHOLD_DEN_MAX:
            raise ValueError(f"threshold must be >= 0 with a denominator <= 2^40, got {threshold}")
        params = ffi.new("lh_route_params *")
        params.router = ROUTERS[router]
        params.replicas = replicas
        params.capacity_blocks = min(int(capacity_blocks), _U64_MAX)
        params.block_size = block_size
        params.window_ns = window_ns
        params.threshold_num = threshold.numerator
        params.threshold_den = threshold.denominator
        params.ttl_ns = ttl_ns
        out = ffi.new("lh_route **")
        err = new_error_buffer()
        raise_for_status(lib.lh_route_create(out, params, err, lib.LH_ERR_LEN), err)
        self.router, self.replicas = router, replicas
        self._own(out[0], lib.lh_route_destroy)

    def process_batch(
        self, keys: Int64Array, offsets: Int64Array, timestamps: Int64Array, input_lens: Int64Array
    ) -> tuple[npt.NDArray[np.int32], Int64Array]:
        """The replica and the prefix hits of requests keys[offsets[i]:offsets[i+1]] at
        timestamps[i] (ns, non-decreasing) with input_lens[i] tokens, in order.

        On failure raises CoreError with ``index`` = the failing request and ``partial`` = the
        (replica, hits) of the requests before it (applied); the failing one changed nothing."""
        handle = self._handle()
        keys, offsets, ts, lens = as_int64(keys), as_int64(offsets), as_int64(timestamps), as_int64(input_lens)
        n = len(offsets) - 1
        if n < 0:
            raise ValueError("offsets needs at least one entry")
        if len(ts) != n or len(lens) != n:
            raise ValueError("timestamps and input_lens must have one entry per request")
        replica = np.zeros(n, dtype=np.int32)
        hits = np.zeros(n, dtype=np.int64)
        n_done = ffi.new("size_t *")
        err = new_error_buffer()
        status = lib.lh_route_process_batch(
            handle,
            ptr("int64_t[]", keys) if len(keys) else ffi.NULL,
            len(keys),
            ptr("int64_t[]", offsets),
            ptr("int64_t[]", ts) if n else ffi.NULL,
            ptr("int64_t[]", lens) if n else ffi.NULL,
            n,
            ptr("int32_t[]", replica) if n else ffi.NULL,
            ptr("int64_t[]", hits) if n else ffi.NULL,
            n_done,
            err,
            lib.LH_ERR_LEN,
        )
        done = int(n_done[0])
        raise_for_status(status, err, index=done, partial=(replica[:done], hits[:done]))
        return replica, hits

    def memory_bytes(self) -> int:
        return int(lib.lh_route_memory(self._handle()))
