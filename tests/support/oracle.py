"""A deliberately naive multi-capacity LRU with an optional fixed TTL, for differential tests.

One real LRU cache per capacity (an OrderedDict that evicts), evaluated on the snapshot taken
before each request and updated by touching the request's blocks from the tail to the head.
No positions, no Fenwick tree, no RLE: nothing shared with the C core. naive_hit_thresholds
answers every capacity at once from the same definition (an LRU cache of capacity C holds the C
most recently used keys), for whole traces where one cache per capacity would be too many.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence

INF = None  # capacity "infinite"


class NaiveLru:
    def __init__(self, capacity: int | None, ttl_ns: int = 0) -> None:
        self.capacity = capacity
        self.ttl_ns = ttl_ns
        self.cache: OrderedDict[int, int] = OrderedDict()  # key -> last access; last = MRU

    def _alive(self, key: int, now: int) -> bool:
        if key not in self.cache:
            return False
        return self.ttl_ns == 0 or now - self.cache[key] < self.ttl_ns

    def request(self, keys: Sequence[int], now: int = 0) -> int:
        """Prefix hit blocks of this request, then commit it."""
        hits = 0
        for key in keys:  # snapshot: nothing is touched before the first miss is found
            if not self._alive(key, now):
                break
            hits += 1
        for key in reversed(keys):  # tail to head: the head ends most recent
            self.cache[key] = now
            self.cache.move_to_end(key)
            if self.capacity is not None:
                while len(self.cache) > self.capacity:
                    self.cache.popitem(last=False)
        return hits


class NaiveTtlCounters:
    """Alive-block and expired-block counts of a TTL lane, from per-key lives."""

    def __init__(self, ttl_ns: int) -> None:
        self.ttl_ns = ttl_ns
        self.last: dict[int, int] = {}
        self.counted: set[int] = set()
        self.expired = 0
        self.now: int | None = None

    def advance(self, now: int) -> None:
        self.now = now
        for key, t in self.last.items():
            if key not in self.counted and now - t >= self.ttl_ns:
                self.counted.add(key)
                self.expired += 1

    def request(self, keys: Sequence[int], now: int) -> None:
        self.advance(now)
        for key in keys:
            self.last[key] = now
            self.counted.discard(key)

    def alive(self) -> int:
        assert self.now is not None
        return sum(1 for t in self.last.values() if self.now - t < self.ttl_ns)


def naive_hit_thresholds(requests: Sequence[Sequence[int]], times: Sequence[int], ttl_ns: int = 0) -> list[list[int]]:
    """Per request, per prefix block, the smallest capacity (in blocks) at which it is a hit.

    An LRU cache of capacity C holds exactly the C most recently used keys (NaiveLru above, with
    expired keys keeping their place until evicted), so a key is held iff its recency rank (1 +
    the number of keys used after it) is <= C. A prefix block hits iff it and every block before
    it are held and alive: its threshold is the largest rank up to it, and the prefix ends at the
    first cold or expired block. Ranks are counted on a sorted list of last-use stamps with bisect:
    no positions reused, no Fenwick tree, no compaction.
    """
    stamp: dict[int, int] = {}  # key -> stamp of its last use (a counter of block touches)
    last: dict[int, int] = {}  # key -> time of its last use
    stamps: list[int] = []  # the last-use stamp of every key, ascending
    clock = 0
    out = []
    for keys, now in zip(requests, times, strict=True):
        thresholds: list[int] = []
        for key in keys:  # the snapshot before the request
            if key not in stamp or (ttl_ns and now - last[key] >= ttl_ns):
                break
            rank = len(stamps) - bisect_right(stamps, stamp[key]) + 1
            thresholds.append(max(rank, thresholds[-1] if thresholds else 0))
        out.append(thresholds)
        for key in reversed(keys):  # commit tail to head
            if key in stamp:
                del stamps[bisect_right(stamps, stamp[key]) - 1]
            clock += 1
            stamp[key], last[key] = clock, now
            stamps.append(clock)
    return out
