"""The offline runner: every LiteHitOfflineRunnerTest scenario of the original, with exact rows,
plus fanout, TTL groups, worker-count independence and atomic publishing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import FACTS_HEADER, config, group, instance, read_facts, request, write_rows

import core_c
from litehit.errors import ConfigError, ReplayError
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.spec import parse_replay_spec

THREE = [request("r1", 1000, [1, 2, 3], 13), request("r2", 2000, [1, 2, 9], 12), request("r3", 3000, [1, 2, 3], 13)]


def replay(tmp_path: Path, rows: list[dict], **kw: object) -> Path:
    trace = write_rows(tmp_path / "trace.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, tmp_path, **kw)))  # type: ignore[arg-type]
    return tmp_path / FACTS_FILE


def test_publishes_facts(tmp_path: Path) -> None:
    facts = replay(tmp_path, THREE)
    assert facts.read_text() == (
        f"{FACTS_HEADER}\n"
        'r1,i1,1000,13,4,16384,"[]"\n'
        'r2,i1,2000,12,4,16384,"[[1,2]]"\n'
        'r3,i1,3000,13,4,16384,"[[1,2],[4,1]]"\n'
    )
    assert not (tmp_path / f"{FACTS_FILE}.tmp").exists()


def test_ttl_group_layers_ttl_onto_the_hit_curve(tmp_path: Path) -> None:
    rows = [
        request("r1", 1 * 10**9, [1, 2, 3], 13),
        request("r2", 3 * 10**9, [1, 2, 9], 12),
        request("r3", 4 * 10**9, [1, 2, 3], 13),
    ]
    facts = read_facts(replay(tmp_path, rows, groups=[group(ttl_seconds=3)]))
    assert [f["hit_curve"] for f in facts] == ["[]", "[[1,2]]", "[[1,2]]"]  # block 3 is exactly 3 s old


def test_rejects_negative_ttl_group(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"instance_groups\[0\].ttl_seconds: ttl_seconds must not be negative"):
        replay(tmp_path, THREE, groups=[group(ttl_seconds=-1)])
    assert not (tmp_path / FACTS_FILE).exists()


def test_parallel_pipeline_matches_serial_output(tmp_path: Path) -> None:
    rng = random.Random(4)
    rows = []
    for i in range(2000):
        raw = [rng.randrange(3) for _ in range(rng.randint(1, 6))]
        rows.append(
            request(f"r{i}", 1000 + i, [int(k) for k in core_c.prefix_hash(raw)], 4 * len(raw) + rng.randrange(4))
        )
    outputs = []
    for workers in (1, 4):
        out = tmp_path / f"w{workers}"
        out.mkdir()
        trace = write_rows(tmp_path / "trace.jsonl", rows)
        spec = parse_replay_spec(config(trace, out, pipeline_worker_count=workers))
        run_replay(spec, chunk_bytes=4096)  # many chunks in flight
        outputs.append((out / FACTS_FILE).read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b"\n") == 2001


def test_applies_override_instance_id_and_prefix_hash(tmp_path: Path) -> None:
    rows = [request("a1", 1000, [7, 8], 8, inst="pod-a"), request("b1", 2000, [7, 8], 8, inst="pod-b")]
    facts = read_facts(
        replay(
            tmp_path,
            rows,
            groups=[group(enable_prefix_hash=True)],
            instances=[instance("service")],
            override_instance_id="service",
        )
    )
    assert [(f["trace_id"], f["instance_id"], f["hit_curve"]) for f in facts] == [
        ("a1", "service", "[]"),
        ("b1", "service", "[[1,2]]"),
    ]


def test_override_instance_id_must_match_configured_instance(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"override_instance_id\[nope\] has no matching configured instance"):
        replay(tmp_path, THREE, override_instance_id="nope")


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        (
            [request("r1", 2000, [1], 4), request("r2", 1000, [1], 4)],
            r"trace is not sorted by timestamp_ns at trace_id\[r2\] \(.*trace.jsonl:2\)",
        ),
        (
            [request("r1", 1000, [1], 4), request("x", 2000, [1], 4, inst="ghost")],
            r"unknown instance\[ghost\] at trace_id\[x\] \(.*:2\)",
        ),
        (
            [request("r1", 1000, [1, 2], 4)],
            r"invalid request trace_id\[r1\]: NormalizeRequest block_keys must contain exactly floor",
        ),
        ([], r"failed to load/replay trace: No optimizer traces loaded from file: .*trace.jsonl"),
        (
            [{"type": "write", "instance_id": "i1", "timestamp_ns": 5, "keys": [1]}],
            r"^trace contains no valid Request/Get events$",
        ),
    ],
    ids=["unsorted", "unknown-instance", "length", "empty", "no-reads"],
)
def test_fails_fast_without_publishing_facts(tmp_path: Path, rows: list[dict], reason: str) -> None:
    with pytest.raises(ReplayError, match=reason):
        replay(tmp_path, rows)
    assert not (tmp_path / FACTS_FILE).exists()
    assert not (tmp_path / f"{FACTS_FILE}.tmp").exists()


def test_failure_leaves_an_earlier_facts_file_untouched(tmp_path: Path) -> None:
    facts = replay(tmp_path, THREE)
    before = facts.read_bytes()
    with pytest.raises(ReplayError):
        replay(tmp_path, [*THREE, request("late", 5, [1], 4)])
    assert facts.read_bytes() == before


def test_the_first_failure_in_input_order_wins(tmp_path: Path) -> None:
    rows = [
        request("r1", 1000, [1], 4),
        request("bad-len", 2000, [1, 2], 4),
        request("ghost", 3000, [1], 4, inst="x"),
        request("r4", 10, [1], 4),
    ]
    with pytest.raises(ReplayError, match=r"invalid request trace_id\[bad-len\].*:2\)$"):
        replay(tmp_path, rows)


def test_ignores_write_events(tmp_path: Path) -> None:
    rows = [
        request("r1", 1000, [1], 4),
        {"type": "write", "instance_id": "i1", "trace_id": "w", "timestamp_ns": 1500, "keys": [9]},
        request("r2", 2000, [1], 4),
    ]
    facts = read_facts(replay(tmp_path, rows))
    assert [(f["trace_id"], f["hit_curve"]) for f in facts] == [("r1", "[]"), ("r2", "[[1,1]]")]


def test_write_rows_are_order_checked(tmp_path: Path) -> None:
    rows = [
        request("r1", 1000, [1], 4),
        {"type": "write", "instance_id": "i1", "trace_id": "w", "timestamp_ns": 500, "keys": [9]},
    ]
    with pytest.raises(ReplayError, match=r"not sorted by timestamp_ns at trace_id\[w\]"):
        replay(tmp_path, rows)


def test_fanout_sweeps_multiple_block_sizes(tmp_path: Path) -> None:
    rows = [request("r1", 1000, [1, 2, 3], 13), request("r2", 2000, [1, 2, 3], 13)]
    facts = read_facts(
        replay(tmp_path, rows, instances=[instance("bs4", 4), instance("bs8", 8)], fanout_all_instances=True)
    )
    assert [(f["trace_id"], f["instance_id"], f["block_size_tokens"], f["hit_curve"]) for f in facts] == [
        ("r1", "bs4", "4", "[]"),
        ("r1", "bs8", "8", "[]"),
        ("r2", "bs4", "4", "[[1,3]]"),
        ("r2", "bs8", "8", "[[1,1]]"),
    ]


def test_rejects_non_multiple_analysis_block_size(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"instance\[i6\] block_size=6 is not a multiple of the trace block_size=4"):
        replay(tmp_path, THREE, instances=[instance("i6", 6)])


def test_default_trace_id_uses_the_trace_instance(tmp_path: Path) -> None:
    rows = [{**request("", 1000, [1], 4, inst="pod-a")}, {**request("x", 2000, [1], 4, inst="pod-a")}]
    del rows[1]["trace_id"]
    facts = read_facts(replay(tmp_path, rows, instances=[instance("svc")], override_instance_id="svc"))
    assert [f["trace_id"] for f in facts] == ["trace_pod-a_1000", "trace_pod-a_2000"]


def test_csv_quoting_of_ids(tmp_path: Path) -> None:
    rows = [request('id,with"quote', 1000, [1], 4, inst="i,1")]
    facts = replay(tmp_path, rows, instances=[instance("i,1")])
    assert facts.read_text().splitlines()[1] == '"id,with""quote","i,1",1000,4,4,16384,"[]"'


def test_ttl_groups_with_fanout_equal_separate_replays(tmp_path: Path) -> None:
    rng = random.Random(9)
    rows, t = [], 0
    for i in range(800):
        t += rng.randrange(0, 2 * 10**9)
        raw = [rng.randrange(4) for _ in range(rng.randint(1, 5))]
        rows.append(request(f"r{i}", t + 1, [int(k) for k in core_c.prefix_hash(raw)], 4 * len(raw)))
    groups = [group("g0", 0), group("g5", 5), group("g20", 20)]
    lanes = [instance("lru", group="g0"), instance("ttl5", group="g5"), instance("ttl20", group="g20")]
    (tmp_path / "all").mkdir()
    trace = write_rows(tmp_path / "trace.jsonl", rows)
    run_replay(
        parse_replay_spec(config(trace, tmp_path / "all", groups=groups, instances=lanes, fanout_all_instances=True))
    )
    together = read_facts(tmp_path / "all" / FACTS_FILE)
    for lane, grp in zip(lanes, groups, strict=True):
        out = tmp_path / lane["instance_id"]
        out.mkdir()
        run_replay(
            parse_replay_spec(
                config(trace, out, groups=[grp], instances=[lane], override_instance_id=lane["instance_id"])
            )
        )
        alone = read_facts(out / FACTS_FILE)
        assert [f for f in together if f["instance_id"] == lane["instance_id"]] == alone
    curves = {
        lane["instance_id"]: [f["hit_curve"] for f in together if f["instance_id"] == lane["instance_id"]]
        for lane in lanes
    }
    assert curves["lru"] != curves["ttl5"] != curves["ttl20"]


def test_extended_facts_add_blocks_and_cut_reason(tmp_path: Path) -> None:
    rows = [
        request("r1", 10**9, [1, 2, 3], 13),
        request("r2", 2 * 10**9, [1, 2, 9], 14),
        request("r3", 9 * 10**9, [1, 2], 9),
    ]
    facts = replay(tmp_path, rows, groups=[group(ttl_seconds=5)], facts_format="extended")
    assert facts.read_text().splitlines() == [
        f"{FACTS_HEADER},complete_blocks,cut_reason",
        'r1,i1,1000000000,13,4,16384,"[]",3,cold',
        'r2,i1,2000000000,14,4,16384,"[[1,2]]",3,cold',
        'r3,i1,9000000000,9,4,16384,"[]",2,expired',
    ]


def test_instanceless_format_needs_a_routing_rule_for_several_lanes(tmp_path: Path) -> None:
    trace = tmp_path / "m.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}\n')
    spec = parse_replay_spec(
        config(trace, tmp_path, block_size=512, instances=[instance("a", 512), instance("b", 512)])
    )
    with pytest.raises(ConfigError, match="mooncake rows carry no instance id: with 2 instances set"):
        run_replay(spec)
    assert not (tmp_path / FACTS_FILE).exists()
