"""A deliberately naive model of the G5 hybrid core (HYBRID_G5.md sections 1, 2, 3.2 and 4).

Written from the spec alone, for differential tests of the C hybrid lane (core_c.hybrid); it
imports nothing from litehit or core_c. One Python list of typed objects ("F", key) / ("L", key),
most recently used first, is the single byte-weighted recency pool. No Fenwick tree, no bitsets,
no compaction: RequiredBytes is a walk down the list.

TTL (section 4) is modelled literally, with the epoch deque and the monotone watermark: every
touch gets the next position of a global counter, a request's touches share one epoch
(start_position, epoch_ts) with epoch_ts = max(now, the last epoch's ts) (the clamp of
BeginCommit), AdvanceTime(now) pops front epochs while AgeNs(now, ts) >= ttl and moves the
watermark to the next epoch's start (or past every position), and an object is alive iff its
position is at or above the watermark. This is NOT the same as "dead iff AgeNs(now, own epoch
ts) >= ttl" once times go backwards: an object swept at a later time stays dead at an earlier
`now` (e.g. ttl 100: [1]@0, [2]@200 sweeps F1, then [1]@50 finds F1 dead, although
AgeNs(50, 0) = 50 < 100), and an epoch opened after the deque ran empty takes the caller's
`now` unclamped. So the watermark is kept as the spec states it.

Dead objects are dropped from the list when the watermark passes them: they sit behind every
alive one, a touch re-inserts an object at the front anyway, and the expired count is taken
before the drop, so nothing observable changes (the engine's compaction does the same).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import pairwise

Obj = tuple[str, int]  # ("F", key) or ("L", key)
Point = tuple[int, int]  # (min_total_capacity_bytes, hit_blocks)


def age_ns(now: int, ts: int) -> int:
    """AgeNs(now, ts) of section 4: 0 if ts >= now, else now - ts."""
    return 0 if ts >= now else now - ts


def project_bytes(points: Iterable[Sequence[int]], capacity: int) -> int:
    """ProjectBytes (section 3.2): hit_blocks of the last point with threshold <= capacity."""
    hits = 0
    for threshold, hit_blocks in points:
        if threshold > capacity:
            break
        hits = int(hit_blocks)
    return hits


def project_infinite(points: Iterable[Sequence[int]]) -> int:
    """ProjectInfinite (section 3.2): the last point's hit_blocks, 0 if there is none."""
    hits = 0
    for _threshold, hit_blocks in points:
        hits = int(hit_blocks)
    return hits


def strictly_increasing(points: Sequence[Sequence[int]]) -> bool:
    """Section 3.1: points strictly increase in both fields."""
    return all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(points))


class NaivePool:
    """The WeightedLruPool of section 2.1/2.2 as a list (MRU first) with a watermark."""

    def __init__(self, full_charge: int, linear_charge: int) -> None:
        self.charges = {"F": full_charge, "L": linear_charge}
        self.order: list[Obj] = []  # most recent first
        self.position: dict[Obj, int] = {}  # object -> position of its latest touch
        self.next_position = 1  # P + 1
        self.alive_from = 0  # the TTL watermark; 0 and 1 both mean "everything alive"
        self._snapshot: dict[Obj, int] | None = None

    # -- mutation --------------------------------------------------------------------------------
    def touch(self, kind: str, key: int) -> None:
        obj = (kind, int(key))
        if obj in self.position:
            self.order.remove(obj)
        self.order.insert(0, obj)
        self.position[obj] = self.next_position
        self.next_position += 1
        self._snapshot = None

    def set_alive_from(self, watermark: int) -> None:
        self.alive_from = watermark
        keep = [obj for obj in self.order if self.alive(obj)]
        for obj in self.order[len(keep) :]:
            del self.position[obj]
        self.order = keep
        self._snapshot = None

    def reset(self) -> None:
        self.order = []
        self.position = {}
        self.next_position = 1
        self.alive_from = 0
        self._snapshot = None

    # -- queries ---------------------------------------------------------------------------------
    def position_count(self) -> int:
        return self.next_position - 1

    def alive(self, obj: Obj) -> bool:
        return obj in self.position and self.position[obj] >= max(self.alive_from, 1)

    def alive_objects(self) -> list[Obj]:
        """Alive objects, most recent first."""
        return [obj for obj in self.order if self.alive(obj)]

    def snapshot(self) -> dict[Obj, int]:
        """RequiredBytes of every alive object: its charge + the charges of all objects in front."""
        if self._snapshot is None:
            snap: dict[Obj, int] = {}
            in_front = 0
            for obj in self.order:
                charge = self.charges[obj[0]]
                if self.alive(obj):
                    snap[obj] = in_front + charge
                in_front += charge
            self._snapshot = snap
        return self._snapshot

    def required(self, kind: str, key: int) -> int | None:
        """RequiredBytes(key): None for an absent or dead object."""
        return self.snapshot().get((kind, int(key)))

    def resident(self, kind: str, key: int) -> bool:
        return self.alive((kind, int(key)))

    def full_count(self) -> int:
        return sum(1 for obj in self.alive_objects() if obj[0] == "F")

    def linear_count(self) -> int:
        return sum(1 for obj in self.alive_objects() if obj[0] == "L")

    def resident_bytes(self) -> int:
        return sum(self.charges[obj[0]] for obj in self.alive_objects())

    def full_within_bytes(self, budget: int) -> int:
        """Walk alive objects from the MRU adding charges; stop before exceeding the budget."""
        total = 0
        full = 0
        for obj in self.alive_objects():
            total += self.charges[obj[0]]
            if total > budget:
                break
            full += obj[0] == "F"
        return full

    def full_objects_before(self, boundary: int) -> int:
        """FullObjectsBefore(b): Full markers at positions < b."""
        return sum(1 for obj, pos in self.position.items() if obj[0] == "F" and pos < boundary)


class NaiveHybrid:
    """TtlLiteHit(CacheObjectConfig{full_charge, linear_charge, step_blocks}, ttl_ns), naively."""

    def __init__(self, full_charge: int, linear_charge: int, step_blocks: int, ttl_ns: int = 0) -> None:
        if full_charge <= 0:
            raise ValueError("LiteHit full_charge_bytes must be positive")
        if linear_charge < 0 or step_blocks < 0 or ttl_ns < 0:
            raise ValueError("negative linear_charge, step_blocks or ttl_ns")
        self.full_charge = full_charge
        self.linear_charge = linear_charge
        self.uses_linear = linear_charge > 0
        self.step = step_blocks if step_blocks > 0 else 1  # 0 acts as 1 inside the policy
        self.ttl_ns = ttl_ns
        self.pool = NaivePool(full_charge, linear_charge)
        self.epochs: deque[tuple[int, int]] = deque()  # (start_position, timestamp_ns)
        self.expired = 0  # Full objects swept by the watermark, cumulative

    # -- TTL -------------------------------------------------------------------------------------
    def advance_time(self, now: int) -> None:
        if self.ttl_ns == 0:
            return
        old = self.pool.alive_from
        new = old
        while self.epochs and age_ns(now, self.epochs[0][1]) >= self.ttl_ns:
            self.epochs.popleft()
            new = self.epochs[0][0] if self.epochs else self.pool.next_position
        if new != old:
            self.expired += self.pool.full_objects_before(new) - self.pool.full_objects_before(old)
            self.pool.set_alive_from(new)

    def _begin_commit(self, now: int) -> None:
        if self.ttl_ns == 0:
            return
        epoch_ts = now if not self.epochs else max(now, self.epochs[-1][1])
        if not self.epochs or self.epochs[-1][1] != epoch_ts:
            self.epochs.append((self.pool.next_position, epoch_ts))

    # -- one request -----------------------------------------------------------------------------
    def scheduled(self, i: int, n: int) -> bool:
        """Section 1.3: the state of position i is written iff (i+1) % step == 0 or i == n-1."""
        return self.uses_linear and ((i + 1) % self.step == 0 or i == n - 1)

    def evaluate(self, keys: Sequence[int]) -> list[Point]:
        """EvaluateRecoveryCurve (section 2.4) on the current snapshot; changes nothing."""
        snap = self.pool.snapshot()
        prefix_full_required: list[int] = []
        running = 0
        for key in keys:
            required = snap.get(("F", int(key)))
            if required is None:
                break
            running = max(running, required)
            prefix_full_required.append(running)
        points: list[Point] = []
        if not self.uses_linear:
            last = 0
            for p, prefix in enumerate(prefix_full_required):
                threshold = max(prefix, last + self.full_charge)
                last = threshold
                points.append((threshold, p + 1))
            return points
        for p, prefix in enumerate(prefix_full_required):
            state = snap.get(("L", int(keys[p])))
            if state is None:
                continue
            threshold = max(prefix, state)
            while points and points[-1][0] >= threshold:
                points.pop()
            points.append((threshold, p + 1))
        return points

    def commit(self, keys: Sequence[int]) -> None:
        """CommitRequest (section 2.5): tail to head, the Linear state before the Full block."""
        n = len(keys)
        for i in range(n - 1, -1, -1):
            if self.scheduled(i, n):
                self.pool.touch("L", keys[i])
            self.pool.touch("F", keys[i])

    def process(self, keys: Sequence[int], now: int = 0) -> list[Point]:
        """ProcessRequest(keys, now): AdvanceTime, evaluate, then (non-empty) BeginCommit + commit."""
        keys = [int(k) for k in keys]
        self.advance_time(now)
        points = self.evaluate(keys)
        if keys:
            self._begin_commit(now)
            self.commit(keys)
        return points

    # -- the direct per-capacity answer ----------------------------------------------------------
    def hits_at(self, keys: Sequence[int], capacity: int, now: int | None = None) -> int:
        """Hit blocks of `keys` at total capacity `capacity` bytes, on the current snapshot.

        Capacity C holds exactly the alive objects whose RequiredBytes <= C. covered = the longest
        prefix whose Full blocks are all held. Linear mode: the deepest p < covered whose Linear
        state is held restores p+1 blocks (any held state, whoever wrote it); without one nothing is
        recoverable. Full-only mode: covered, lowered by the monotone defense (each extra hit
        costs at least one more Full charge): the largest k <= covered with
        RequiredBytes(F keys[i]) + (k-1-i) * full_charge <= C for every i < k. That defense only
        bites on repeated keys; on duplicate-free requests this is exactly covered
        (true_hits_at). If `now` is given the clock is advanced first (as process would).
        """
        if now is not None:
            self.advance_time(now)
        snap = self.pool.snapshot()
        covered = 0
        for key in keys:
            required = snap.get(("F", int(key)))
            if required is None or required > capacity:
                break
            covered += 1
        if self.uses_linear:
            best = 0
            for p in range(covered):
                state = snap.get(("L", int(keys[p])))
                if state is not None and state <= capacity:
                    best = p + 1
            return best
        # The condition only gets harder as k grows (every term grows by one charge), so take the
        # first k that fails; worst = max over i < k of RequiredBytes(F keys[i]) - i * full_charge.
        hits = 0
        worst = None
        for k in range(1, covered + 1):
            term = snap[("F", int(keys[k - 1]))] - (k - 1) * self.full_charge
            worst = term if worst is None else max(worst, term)
            if worst + (k - 1) * self.full_charge > capacity:
                break
            hits = k
        return hits

    def true_hits_at(self, keys: Sequence[int], capacity: int) -> int:
        """Full-only: the prefix actually held at capacity C (no defense). Projections never exceed it."""
        snap = self.pool.snapshot()
        covered = 0
        for key in keys:
            required = snap.get(("F", int(key)))
            if required is None or required > capacity:
                break
            covered += 1
        return covered

    # -- observability ---------------------------------------------------------------------------
    def unique_blocks(self) -> int:
        return self.pool.full_count()

    def resident_linear(self) -> int:
        return self.pool.linear_count()

    def resident_bytes(self) -> int:
        return self.pool.resident_bytes()

    def expired_full_blocks(self) -> int:
        return self.expired

    def full_within_bytes(self, budget: int) -> int:
        return self.pool.full_within_bytes(budget)

    def reset(self) -> None:
        self.pool.reset()
        self.epochs.clear()
        self.expired = 0
