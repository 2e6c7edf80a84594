"""In process, a fanout's lanes that differ only in TTL share one lane core, a TTL view each
(litehit.replay.lanes.SharedLanes): the facts, cut reasons included, and every lane's counts are
those of the service, whose tasks give each lane a core of its own; a failure of the shared core
fails the replay in input order with nothing published."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, instance, request, write_rows
from test_replay_staged import lane_stage, merge_stage

from litehit.cli.replay import print_summary
from litehit.errors import ReplayError
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.replay.lanes import SharedLanes, shared_units
from litehit.replay.plan import LaneSpec
from litehit.replay.staged import parse_stage
from litehit.spec import parse_replay_spec

SECOND = 10**9


def _trace(tmp_path: Path, rows: int = 900, seed: int = 11) -> Path:
    """Conversations over a few seconds: re-reads come back within and beyond TTLs of 1 to 3 s."""
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        keys = [rng.randrange(30) * 10 + j for j in range(rng.randint(1, 6))]
        out.append(request(f"r{i}", i * SECOND // 90 + 1, keys, 4 * len(keys) + rng.randrange(4)))
    return write_rows(tmp_path / "t.jsonl", out)


LANES = [
    instance("plain", 4, group="g0"),
    instance("ttl1", 4, group="g1"),
    instance("big", 8, group="g0"),
    instance("ttl3", 4, group="g3"),
    instance("again", 4, group="g1"),  # the same TTL twice
    instance("big_ttl1", 8, group="g1"),
]
GROUPS = [group("g0"), group("g1", 1), group("g3", 3)]


def _spec(trace: Path, out: Path, **extra: Any) -> Any:
    out.mkdir(exist_ok=True)
    base: dict[str, Any] = dict(instances=LANES, groups=GROUPS, fanout_all_instances=True, facts_format="extended")
    return parse_replay_spec(config(trace, out, **{**base, **extra}))


@pytest.mark.parametrize("chunk_bytes", [700, 1 << 20])
def test_shared_lanes_publish_the_services_bytes_and_counts(tmp_path: Path, chunk_bytes: int) -> None:
    trace = _trace(tmp_path)
    result = run_replay(_spec(trace, tmp_path / "a"), chunk_bytes=chunk_bytes)
    spec = _spec(trace, tmp_path / "b")
    parse_stage(spec, tmp_path / "work", chunk_bytes=64 << 10)
    alone = {i: lane_stage(spec, tmp_path / "work", i) for i in range(len(LANES))}
    merge_stage(spec, tmp_path / "work", alone)
    assert (tmp_path / "a" / FACTS_FILE).read_bytes() == (tmp_path / "b" / FACTS_FILE).read_bytes()
    by_id = {lane.instance_id: lane for lane in result.lanes}
    for i, inst in enumerate(LANES):
        lane, own = by_id[inst["instance_id"]], alone[i]
        assert (lane.requests, lane.blocks, lane.unique_blocks, lane.expired_blocks) == (
            own.requests,
            own.blocks,
            own.unique_blocks,
            own.expired_blocks,
        ), inst["instance_id"]
        assert own.shares_core_with is None  # run alone, as the recovery may
    assert by_id["ttl1"].expired_blocks > 0 and by_id["ttl3"].expired_blocks < by_id["ttl1"].expired_blocks
    # plain, ttl1, ttl3 and again share plain's core; big_ttl1 shares big's; memory counted once
    shared = {lane.instance_id: lane.shares_core_with for lane in result.lanes}
    assert shared == {"plain": None, "ttl1": "plain", "big": None, "ttl3": "plain", "again": "plain", "big_ttl1": "big"}
    assert all(lane.memory_bytes == 0 for lane in result.lanes if lane.shares_core_with)
    assert all(lane.memory_bytes > 0 for lane in result.lanes if not lane.shares_core_with)


def test_the_summary_says_which_core_a_lane_shares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_replay(_spec(_trace(tmp_path, rows=50), tmp_path / "a"))
    print_summary(result)
    out = capsys.readouterr().out
    assert "  lane ttl1: 50 requests" in out
    assert out.count("engine state shared with lane plain") == 3
    assert out.count("engine state shared with lane big") == 1
    assert out.count("MiB engine state") == 2


def _lane(index: int, block_size: int = 4, ttl: int = 0, hashed: bool = False, hybrid: bool = False) -> LaneSpec:
    return LaneSpec(index, f"l{index}", block_size, 1024, ttl, hashed, 512 if hybrid else 0, 3 if hybrid else 0)


def test_which_lanes_share_a_core() -> None:
    """Lanes of the same requests share (in order); a hybrid lane never does; at most 16 share."""
    lanes = [_lane(0), _lane(1, ttl=5), _lane(2, 8), _lane(3, hybrid=True), _lane(4, ttl=9), _lane(5, 8, ttl=1)]
    inputs = (0, 0, 2, 0, 0, 2)  # lane 3 has lane 0's requests but a hybrid core of its own
    assert shared_units(lanes, inputs) == [[0, 1, 4], [2, 5], [3]]
    assert shared_units(lanes, tuple(range(6))) == [[k] for k in range(6)]  # routed lanes: each its own
    many = [_lane(i, ttl=i) for i in range(20)]
    assert shared_units(many, (0,) * 20) == [list(range(16)), list(range(16, 20))]
    assert shared_units(many[:3][::-1], (0,) * 20) == [[0, 1, 2]]  # indices into the lanes given
    with pytest.raises(ValueError, match="hybrid"):
        SharedLanes([_lane(0), _lane(3, hybrid=True)])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_shared_core_fails_in_input_order_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """The core fails at its third chunk; every lane of the unit stops (none reads the facts of
    an earlier chunk); the replay fails with that error and publishes nothing."""
    trace = _trace(tmp_path, rows=300)
    spec = _spec(trace, tmp_path / "a", pipeline_worker_count=workers)
    real, fed = SharedLanes.run, [0]

    def failing(self: SharedLanes, work: Any) -> Any:
        fed[0] += 1
        if self.specs[0].block_size == 4 and fed[0] >= 3:
            raise MemoryError("the shared core ran out of memory")
        return real(self, work)

    monkeypatch.setattr(SharedLanes, "run", failing)
    with pytest.raises((ReplayError, MemoryError), match="ran out of memory"):
        run_replay(spec, chunk_bytes=600)
    assert not (tmp_path / "a" / FACTS_FILE).exists()
