"""The staged pipeline (parse once -> one task per lane -> merge) publishes the same bytes as
the in-process runner, and fails the same way."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from helpers import config, group, instance, request, write_rows

import core_c
from litehit.errors import ReplayError
from litehit.jobs.replay import FACTS_FILE, KIND, ReplayJobSpec, ReplayPartResult, run_replay
from litehit.jobs.stored import merge_stored, run_stored_part
from litehit.replay.staged import parse_stage, part_output, read_manifest, stored_plan
from litehit.spec import ReplaySpec, parse_replay_spec


def parts_of(spec: ReplaySpec, workdir: Path) -> list:
    return KIND.parts(ReplayJobSpec(config={}), stored_plan(spec, read_manifest(workdir)))


def lane_stage(spec: ReplaySpec, workdir: Path, lane: int) -> ReplayPartResult:
    """One lane of the replay, as its task runs it."""
    job = ReplayJobSpec(config=spec.model_dump(mode="json"))
    output = run_stored_part(KIND, job, spec, workdir, lane, parts_of(spec, workdir)[lane])
    assert isinstance(output.result, ReplayPartResult)
    return output.result


def merge_stage(spec: ReplaySpec, workdir: Path, results: dict[int, ReplayPartResult] | None = None) -> object:
    """The replay's merge, as its task runs it (every lane's result; zeros for lanes not given)."""
    parts = parts_of(spec, workdir)
    given = results or {}
    stored = [
        (given.get(i) or ReplayPartResult(requests=0, blocks=0, unique_blocks=0, memory_bytes=0, expired_blocks=0))
        for i in range(len(parts))
    ]
    job = ReplayJobSpec(config=spec.model_dump(mode="json"))
    return merge_stored(KIND, job, spec, workdir, parts, [r.model_dump() for r in stored]).value


def staged(spec_data: dict, workdir: Path, order: list[int] | None = None) -> bytes:
    spec = parse_replay_spec(spec_data)
    manifest = parse_stage(spec, workdir, chunk_bytes=64 << 10)
    lanes = order if order is not None else list(range(len(spec.instances)))
    stats = {i: lane_stage(spec, workdir, i) for i in lanes}
    result = merge_stage(spec, workdir, stats)
    assert result.reads == manifest.reads  # type: ignore[attr-defined]
    return (Path(spec.output_result_path) / FACTS_FILE).read_bytes()


def in_process(spec_data: dict) -> bytes:
    spec = parse_replay_spec(spec_data)
    run_replay(spec)
    return (Path(spec.output_result_path) / FACTS_FILE).read_bytes()


def test_staged_equals_in_process_on_mooncake_with_fanout_and_ttl(data_dir: Path, tmp_path: Path) -> None:
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    lanes = [instance("b512", 512, group="g0"), instance("b1024", 1024, group="g0"), instance("t60", 512, group="g60")]
    base = dict(
        groups=[group("g0"), group("g60", 60)],
        instances=lanes,
        block_size=512,
        fanout_all_instances=True,
        facts_format="extended",
    )
    trace = data_dir / "conversation_trace.jsonl"
    want = in_process(config(trace, tmp_path / "a", **base))
    assert staged(config(trace, tmp_path / "b", **base), tmp_path / "work", order=[2, 0, 1]) == want


def test_staged_equals_in_process_with_trace_routing(tmp_path: Path) -> None:
    rng = random.Random(2)
    rows = []
    for i in range(3000):
        raw = [rng.randrange(3) for _ in range(rng.randint(0, 6))]
        inst = rng.choice(["a", "b", "c"])
        if rng.random() < 0.2:
            rows.append({"type": "write", "instance_id": inst, "timestamp_ns": i + 1, "keys": [1]})
        else:
            rows.append(request(f"r{i}", i + 1, [int(k) for k in core_c.prefix_hash(raw)], 4 * len(raw) + 1, inst=inst))
    trace = write_rows(tmp_path / "t.jsonl", rows)
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
    lanes = [instance("a"), instance("b", 8), instance("c")]
    want = in_process(config(trace, tmp_path / "x", instances=lanes))
    assert staged(config(trace, tmp_path / "y", instances=lanes), tmp_path / "work") == want


def test_parse_stage_fails_fast_and_writes_nothing(tmp_path: Path) -> None:
    trace = write_rows(tmp_path / "t.jsonl", [request("r1", 5, [1], 4), request("r2", 4, [1], 4)])
    spec = parse_replay_spec(config(trace, tmp_path))
    with pytest.raises(ReplayError, match=r"not sorted by timestamp_ns at trace_id\[r2\]"):
        parse_stage(spec, tmp_path / "work")
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == []


def test_merge_without_lane_outputs_fails_clearly(tmp_path: Path) -> None:
    trace = write_rows(tmp_path / "t.jsonl", [request("r1", 5, [1], 4)])
    spec = parse_replay_spec(config(trace, tmp_path))
    parse_stage(spec, tmp_path / "work")
    with pytest.raises(ReplayError, match="missing or unreadable"):
        merge_stage(spec, tmp_path / "work")
    assert not (tmp_path / FACTS_FILE).exists()


def test_a_lane_stage_rerun_gives_the_same_bytes(tmp_path: Path) -> None:
    trace = write_rows(tmp_path / "t.jsonl", [request(f"r{i}", i + 1, [1, 2], 8) for i in range(50)])
    spec = parse_replay_spec(config(trace, tmp_path))
    parse_stage(spec, tmp_path / "work")
    lane_stage(spec, tmp_path / "work", 0)
    first = part_output(tmp_path / "work", 0).read_bytes()
    shutil.copy(part_output(tmp_path / "work", 0), tmp_path / "copy")
    lane_stage(spec, tmp_path / "work", 0)
    assert part_output(tmp_path / "work", 0).read_bytes() == first


def test_a_fanouts_lanes_with_the_same_requests_share_one_lane_file(tmp_path: Path) -> None:
    """Lanes of one block size and key hashing in a fanout (two TTLs here) get the same requests:
    the parse stage writes them once, the lanes sharing them read that file, and the bytes
    published are the in-process run's. A lane of another block size, or hashing its keys, has
    its own file."""
    rng = random.Random(5)
    rows = [request(f"r{i}", 10 * i + 1, [rng.randrange(40) for _ in range(rng.randint(1, 9))], 0) for i in range(400)]
    for row in rows:
        row["input_len"] = 4 * len(row["keys"]) + rng.randrange(4)
    trace = write_rows(tmp_path / "t.jsonl", rows)
    lanes = [
        instance("a", 4, group="g0"),
        instance("b", 8, group="g0"),
        instance("a_ttl", 4, group="g1"),
        instance("a_hashed", 4, group="gh"),
        instance("b_ttl", 8, group="g1"),
    ]
    groups = [group("g0"), group("g1", 1), group("gh", enable_prefix_hash=True)]
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
    base = dict(instances=lanes, groups=groups, fanout_all_instances=True, facts_format="extended")
    want = in_process(config(trace, tmp_path / "x", **base))
    work = tmp_path / "work"
    assert staged(config(trace, tmp_path / "y", **base), work, order=[4, 2, 0, 3, 1]) == want
    assert read_manifest(work).lane_files == [0, 1, 0, 3, 1]
    assert sorted(p.name for p in work.glob("lane-*.in")) == ["lane-0.in", "lane-1.in", "lane-3.in"]


def test_a_stage_written_before_lane_files_were_shared_is_still_read(tmp_path: Path) -> None:
    """A manifest without lane_files (written before lanes shared them) reads lane-<i>.in for lane i."""
    rows = [request(f"r{i}", i + 1, [i % 7, i % 5], 8) for i in range(60)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    lanes = [instance("a", group="g0"), instance("a_ttl", group="g1")]
    base = dict(instances=lanes, groups=[group("g0"), group("g1", 1)], fanout_all_instances=True)
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
    want = in_process(config(trace, tmp_path / "x", **base))
    spec = parse_replay_spec(config(trace, tmp_path / "y", **base))
    work = tmp_path / "work"
    parse_stage(spec, work)
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest.pop("lane_files") == [0, 0]
    (work / "manifest.json").write_text(json.dumps(manifest))
    (work / "lane-0.in").rename(work / "lane-1.in")  # where an old stage put lane 1's requests ...
    with pytest.raises(ReplayError, match="unreadable"):  # ... and lane 0's file is its own
        lane_stage(spec, work, 0)
    shutil.copy(work / "lane-1.in", work / "lane-0.in")
    stats = {i: lane_stage(spec, work, i) for i in (0, 1)}
    merge_stage(spec, work, stats)
    assert (Path(spec.output_result_path) / FACTS_FILE).read_bytes() == want


def test_stage_arrays_read_back_exactly_and_a_cut_file_fails(tmp_path: Path) -> None:
    """read_arrays reads write_arrays' plain headers itself and hands any other to numpy's reader:
    every dtype and shape comes back equal and writable; a file cut short is a ValueError."""
    import numpy as np

    from litehit.replay.staged import read_arrays, write_arrays

    arrays = [
        np.arange(5, dtype=np.int64),
        np.zeros((0, 2), np.int64),
        np.arange(12, dtype=np.int64).reshape(6, 2),
        np.array([1, 2, 3], np.uint8),
        np.arange(7, dtype=np.uint32),
        np.array([0.5, -1.0]),
        np.array([True, False]),
        np.array([[1, 2], [3, 4]], dtype=">i4"),  # big-endian: numpy's reader
        np.array(["ab", "c"]),  # not a number: numpy's reader
        np.arange(6, dtype=np.int64).reshape(3, 2).T,  # a transposed view: written in C order
    ]
    path = tmp_path / "arrays.bin"
    with path.open("wb") as f:
        write_arrays(f, *arrays)
    with path.open("rb") as f:
        got = read_arrays(f, len(arrays))
        assert f.read() == b""
    for want, have in zip(arrays, got, strict=True):
        assert have.dtype == want.dtype and have.shape == want.shape and np.array_equal(have, want)
        assert have.flags.writeable
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 3])
    with path.open("rb") as f, pytest.raises(ValueError, match="EOF"):
        read_arrays(f, len(arrays))
