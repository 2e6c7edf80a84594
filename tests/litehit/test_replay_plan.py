"""Which lanes of a plan share their requests (litehit.replay.plan.lane_inputs), and that the
chunks hand the sharing lanes one normalized LaneWork."""

from __future__ import annotations

from pathlib import Path

from helpers import config, group, instance, request, write_rows

from litehit.replay.chunks import TraceChunks, resolve_format
from litehit.replay.plan import Routing, make_plan
from litehit.spec import parse_replay_spec

LANES = [
    instance("a", 4, group="g0"),
    instance("b", 8, group="g0"),
    instance("a_ttl", 4, group="g1"),
    instance("a_hashed", 4, group="gh"),
]
GROUPS = [group("g0"), group("g1", 1), group("gh", enable_prefix_hash=True)]


def trace(tmp_path: Path) -> Path:
    rows = [request(f"r{i}", i + 1, [i % 5, i % 3], 9, inst=LANES[i % 4]["instance_id"]) for i in range(40)]
    return write_rows(tmp_path / "t.jsonl", rows)


def chunks_of(spec_data: dict) -> tuple[tuple[int, ...], list]:
    spec = parse_replay_spec(spec_data)
    plan = make_plan(spec, resolve_format(spec, spec.trace_file_path))
    return plan.inputs, list(TraceChunks(spec, plan, chunk_bytes=256))


def test_a_fanouts_lanes_of_one_block_size_and_hashing_share_their_work(tmp_path: Path) -> None:
    inputs, chunks = chunks_of(
        config(trace(tmp_path), tmp_path, instances=LANES, groups=GROUPS, fanout_all_instances=True)
    )
    assert inputs == (0, 1, 0, 3)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.lanes[2] is chunk.lanes[0]
        assert len({id(work) for work in chunk.lanes}) == 3


def test_lanes_routed_by_the_trace_have_their_own_work(tmp_path: Path) -> None:
    inputs, chunks = chunks_of(config(trace(tmp_path), tmp_path, instances=LANES, groups=GROUPS))
    assert inputs == (0, 1, 2, 3)
    for chunk in chunks:
        assert len({id(work) for work in chunk.lanes}) == 4
    spec = parse_replay_spec(config(trace(tmp_path), tmp_path, instances=LANES, groups=GROUPS))
    assert make_plan(spec, resolve_format(spec, spec.trace_file_path)).routing is Routing.TRACE
