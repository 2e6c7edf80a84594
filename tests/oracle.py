"""A deliberately naive multi-capacity LRU with an optional fixed TTL, for differential tests.

One real LRU cache per capacity (an OrderedDict that evicts), evaluated on the snapshot taken
before each request and updated by touching the request's blocks from the tail to the head.
No positions, no Fenwick tree, no RLE: nothing shared with the C core.
"""

from __future__ import annotations

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
