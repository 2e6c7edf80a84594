"""The state-free routers as the replay plan's lane router (litehit.replay.plan.LaneRouter).

Every read request, in input order (index i from 0, reads only), goes to one replica per router:

- ``round_robin``: i mod N.
- ``random``: the i-th output of SplitMix64 seeded with ``seed`` (output i = mix(seed + (i + 1) x
  0x9E3779B97F4A7C15 mod 2^64), Steele, Lea and Flood's finalizer), mod N. Stable across versions
  and independent of chunking.
- ``session``: the request's root session id, read as unsigned 64-bit, mod N. qwen_bailian rows
  chain: a row's root is its parent_chat_id's root when that chat appeared earlier in the trace,
  the parent_chat_id itself when it did not (the conversation began before the trace), and its
  own chat_id when it has no parent (-1, null or missing); ids are session numbers (an integer id
  is its value, a string id its FNV-1a 64 hash unless it is a canonical integer: lh_trace_scan.h).
  The other formats carry no session ids: a request's session is its first raw trace key (as in
  the row, before prefix hashing and re-blocking), since a conversation's turns share their first
  block; a request without keys goes to 0.
- ``prefix_hash``: the lane key (unsigned 64-bit, after prefix hashing and re-blocking) of block k
  = ``prefix_blocks`` (the key that encodes the first k blocks), mod N; a request with fewer
  complete blocks uses its last one's key, one without complete blocks goes to 0.

Lane g x N + j is replica j (named ``r<j>``) of the g-th state-free router. When least_loaded or
cache_aware is asked, one more lane (``POOL``, the last) receives every read: their simulations
route it themselves (litehit.jobs.routes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core_c.scan import ScanResult
from litehit.replay.plan import LaneSpec
from litehit.routes.options import Router, RoutesOptions
from litehit.spec import TraceFormat

__all__ = ["GAMMA", "POOL", "RouterSet", "replica_name", "splitmix64"]

Int64Array = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
GAMMA = np.uint64(0x9E3779B97F4A7C15)
CHAINED_SESSIONS = (TraceFormat.QWEN_BAILIAN,)  # formats whose rows carry chat_id / parent_chat_id
POOL = "pool"  # the lane of every read, for the simulated routers


def replica_name(j: int) -> str:
    return f"r{j}"


def splitmix64(seed: int, index: U64) -> U64:
    """SplitMix64's outputs number `index` (from 0) for `seed`, as uint64 (arithmetic mod 2^64)."""
    z = np.uint64(seed) + (index + np.uint64(1)) * GAMMA
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: U64 = z ^ (z >> np.uint64(31))
    return out


@dataclass(frozen=True)
class RouterSet:
    """The routers of one what-if over N replicas of the config's instance."""

    options: RoutesOptions

    @property
    def replicas(self) -> int:
        return self.options.replicas

    def lanes(self, template: LaneSpec) -> tuple[LaneSpec, ...]:
        n = self.replicas
        replicas = [
            dataclasses.replace(template, index=g * n + j, instance_id=replica_name(j))
            for g in range(len(self.options.state_free))
            for j in range(n)
        ]
        pool = [dataclasses.replace(template, index=len(replicas), instance_id=POOL)] if self.options.simulated else []
        return (*replicas, *pool)

    def start(self, fmt: TraceFormat) -> _Assigner:
        return _Assigner(self.options, chained=fmt in CHAINED_SESSIONS)


class _Assigner:
    def __init__(self, options: RoutesOptions, *, chained: bool) -> None:
        self.options = options
        self.seen = 0  # reads assigned in earlier chunks
        self.chained = chained and Router.SESSION in options.state_free
        self.roots: dict[int, int] = {}  # chained: every chat seen -> its root session

    def _chained_roots(self, rows: ScanResult, reads: Int64Array) -> U64:
        """The root session of each read, following parent_chat_id through the chats seen."""
        roots, out = self.roots, []
        for chat, parent in zip(rows.chat[reads].tolist(), rows.parent[reads].tolist(), strict=True):
            root = chat if parent == chat else roots.get(parent, parent)
            roots[chat] = root
            out.append(root)
        return np.asarray(out, dtype=np.int64).view(np.uint64)

    def assign(self, rows: ScanResult, reads: Int64Array, keys: Int64Array, offsets: Int64Array) -> Int64Array:
        n = np.uint64(self.options.replicas)
        count = len(reads)
        index = np.arange(self.seen, self.seen + count, dtype=np.uint64)
        self.seen += count
        free = self.options.state_free
        out = np.zeros((len(free) + bool(self.options.simulated), count), dtype=np.int64)
        out[len(free) :] = len(free) * self.options.replicas  # the pool lane
        for g, router in enumerate(free):
            if router is Router.ROUND_ROBIN:
                replica = index % n
            elif router is Router.RANDOM:
                replica = splitmix64(self.options.seed, index) % n
            elif router is Router.SESSION and self.chained:
                replica = self._chained_roots(rows, reads) % n
            elif router is Router.SESSION:
                starts, ends = rows.key_offsets[reads], rows.key_offsets[reads + 1]
                first = rows.keys[np.minimum(starts, max(len(rows.keys) - 1, 0))] if len(rows.keys) else starts * 0
                replica = np.where(ends > starts, first.view(np.uint64) % n, np.uint64(0))
            else:
                blocks = offsets[1:] - offsets[:-1]
                at = offsets[:-1] + np.minimum(blocks, self.options.prefix_blocks) - 1
                key = keys[np.clip(at, 0, max(len(keys) - 1, 0))] if len(keys) else at * 0
                replica = np.where(blocks > 0, key.view(np.uint64) % n, np.uint64(0))
            out[g] = replica.astype(np.int64) + g * self.options.replicas
        return out
