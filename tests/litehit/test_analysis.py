"""The exact curve (equal to the projector at every breakpoint and one block either side), the
target capacities, miss attribution (parts always sum to the input tokens) and the plots."""

from __future__ import annotations

import functools
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import FACTS_HEADER, config, group, instance, request, write_rows
from hypothesis import given, settings
from hypothesis import strategies as st

import core_c
from litehit.cli import main
from litehit.curve import exact_curves
from litehit.jobs.replay import run_replay
from litehit.misses import attribute_misses
from litehit.plots import plot_facts
from litehit.query import CapacitySlot, parse_capacities
from litehit.spec import parse_replay_spec


def random_facts(rng: random.Random, rows: int, instances: list[tuple[str, int, int]], extended: bool = False) -> str:
    """Well-formed facts: increasing segments with gaps, hits within the complete blocks."""
    lines = [FACTS_HEADER + (",complete_blocks,cut_reason" if extended else "")]
    for i in range(rows):
        name, bs, bb = rng.choice(instances)
        complete = rng.randint(0, 12)
        length = complete * bs + rng.randrange(bs)
        segs, start, hits = [], 0, 0
        while hits < complete and rng.random() < 0.7:
            start += rng.randint(1, 40)
            run = rng.randint(1, complete - hits)
            segs.append(f"[{start},{run}]")
            start += run
            hits += run
        cut = "none" if hits == complete else rng.choice(["cold", "expired"])
        tail = f",{complete},{cut}" if extended else ""
        lines.append(f'r{i},{name},{i},{length},{bs},{bb},"[{",".join(segs)}]"{tail}')
    return "\n".join(lines) + "\n"


@functools.cache
def _rows(facts: Path, stamp: float) -> list[tuple[str, list[list[int]], int, int]]:
    rows = []
    for line in facts.read_text().splitlines()[1:]:
        parts = line.split(",", 6)
        rows.append((parts[1], json.loads(parts[6].split('"')[1]), int(parts[4]), int(parts[5])))
    return rows


def hit_tokens_by_projection(facts: Path, name: str, capacity_bytes: int) -> int:
    """Hit tokens at a byte capacity, one core_c.project_bytes call per facts row."""
    return sum(
        core_c.project_bytes(curve, capacity_bytes, bb) * bs
        for inst, curve, bs, bb in _rows(facts, facts.stat().st_mtime)
        if inst == name
    )


@pytest.mark.parametrize("seed", range(6))
def test_curve_equals_the_projector_around_every_breakpoint(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lanes = [("a", 4, 1000), ("b", 16, 4096)] if seed % 2 else [("a", 4, 1000)]
    facts = tmp_path / "f.csv"
    facts.write_text(random_facts(rng, 400, lanes))
    curves = exact_curves(facts)
    assert [c.instance_id for c in curves] == sorted(n for n, _, _ in lanes)
    for curve in curves:
        bb = curve.block_bytes
        assert bb is not None and curve.capacity_blocks is not None
        for i, blocks in enumerate(curve.capacity_blocks):
            for c in (blocks - 1, blocks, blocks + 1):
                if c < 0:
                    continue
                want = hit_tokens_by_projection(facts, curve.instance_id, c * bb)
                assert curve.hit_tokens_at(c * bb) == want, (curve.instance_id, c)
            if i:  # a breakpoint is a change
                assert curve.hit_tokens[i] > curve.hit_tokens[i - 1]
        assert curve.plateau.hit_tokens == hit_tokens_by_projection(facts, curve.instance_id, 2**62)


def test_mixed_block_bytes_merge_on_the_byte_axis(tmp_path: Path) -> None:
    rng = random.Random(11)
    facts = tmp_path / "f.csv"
    facts.write_text(random_facts(rng, 300, [("x", 4, 1000), ("x", 8, 3000)]))
    (curve,) = exact_curves(facts)
    assert curve.capacity_blocks is None and curve.block_bytes is None
    for b in sorted(
        {*curve.capacity_bytes, *(c + 1 for c in curve.capacity_bytes), *(max(c - 1, 0) for c in curve.capacity_bytes)}
    ):
        assert curve.hit_tokens_at(b) == hit_tokens_by_projection(facts, "x", b)


def test_targets_are_the_smallest_capacities_reaching_the_fraction(tmp_path: Path) -> None:
    facts = tmp_path / "f.csv"
    facts.write_text(random_facts(random.Random(3), 500, [("a", 4, 1000)]))
    (curve,) = exact_curves(facts, [0.5, 0.9, 1.0])
    plateau = curve.plateau.hit_tokens
    for fraction, i in curve.targets.items():
        assert curve.hit_tokens[i] * 10 >= plateau * fraction * 10 - 1e-9
        assert i == 0 or curve.hit_tokens[i - 1] < plateau * fraction
    assert curve.targets[1.0] == len(curve) - 1


def test_curve_of_the_mooncake_trace(data_dir: Path, tmp_path: Path) -> None:
    spec = config(
        data_dir / "conversation_trace.jsonl",
        tmp_path,
        block_size=512,
        instances=[instance("m", 512, sizes=(1 << 20,))],
    )
    run_replay(parse_replay_spec(spec))
    (curve,) = exact_curves(tmp_path / "litehit_facts.csv")
    golden = [json.loads(c) for c in (data_dir / "conversation_b512.curves").read_text().splitlines()]
    assert curve.plateau.hit_tokens == 512 * sum(run for c in golden for _, run in c)
    assert curve.plateau.capacity_blocks == max(s + r - 1 for c in golden for s, r in c)
    assert curve.requests == 12031


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), extended=st.booleans(), caps=st.lists(st.floats(-2, 1e-4), min_size=1, max_size=5))
def test_attribution_parts_sum_to_the_input_tokens(
    tmp_path_factory: pytest.TempPathFactory, seed: int, extended: bool, caps: list[float]
) -> None:
    tmp = tmp_path_factory.mktemp("attr")
    facts = tmp / "f.csv"
    facts.write_text(random_facts(random.Random(seed), 60, [("a", 4, 1000), ("b", 16, 2048)], extended))
    is_ext, rows = attribute_misses(facts, [CapacitySlot(c) for c in caps])
    assert is_ext == extended
    for r in rows:
        assert min(r.hit, r.evicted, r.cold_or_expired, r.tail) >= 0
        if extended:
            assert r.cold is not None and r.expired is not None
            assert r.hit + r.evicted + r.cold + r.expired + r.tail == r.input_tokens
            assert r.cold + r.expired == r.cold_or_expired
        else:
            assert r.cold is None and r.expired is None
            assert r.hit + r.evicted + r.cold_or_expired + r.tail == r.input_tokens


def test_attribution_tells_expired_from_cold_with_extended_facts(tmp_path: Path) -> None:
    rows = [
        request("r1", 10**9, [1, 2, 3], 13),
        request("r2", 2 * 10**9, [1, 2, 9], 14),
        request("r3", 9 * 10**9, [1, 2], 9),
    ]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    run_replay(parse_replay_spec(config(trace, tmp_path, groups=[group(ttl_seconds=5)], facts_format="extended")))
    _, (one, inf) = attribute_misses(tmp_path / "litehit_facts.csv", parse_capacities([repr(16384 / 2**30), "-1"]))
    # r1: 3 cold blocks + 1 tail; r2: hits [1,2] (at capacity 1 only block 1), block 9 cold + 2 tail;
    # r3: both blocks expired + 1 tail token.
    assert (one.hit, one.evicted, one.cold, one.expired, one.tail) == (4, 4, 16, 8, 4)
    assert (inf.hit, inf.evicted) == (8, 0)
    assert one.input_tokens == 36


def test_plots_are_written_as_png_and_svg(data_dir: Path, tmp_path: Path) -> None:
    assert (
        main(
            [
                "replay",
                str(data_dir / "conversation_trace.jsonl"),
                "--ttl-seconds",
                "0,60",
                "--extended",
                "-o",
                str(tmp_path),
            ]
        )
        == 0
    )
    files = plot_facts(tmp_path / "litehit_facts.csv", tmp_path / "plots", capacities=parse_capacities(["1", "8"]))
    assert sorted(p.name for p in files) == ["hit_rate.png", "hit_rate.svg", "misses.png", "misses.svg"]
    for path in files:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
        else:
            text = ET.tostring(ET.parse(path).getroot(), encoding="unicode")
            assert "b512_ttl60" in text and "GiB" in text
    svg = (tmp_path / "plots" / "misses.svg").read_text()
    assert "expired" in svg and "evicted" in svg and "incomplete last block" in svg


def test_cli_curve_misses_and_plot(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), "-o", str(tmp_path)]) == 0
    facts = str(tmp_path / "litehit_facts.csv")
    assert main(["curve", facts, "--targets", "0.9", "-o", str(tmp_path / "c.json")]) == 0
    data = json.loads((tmp_path / "c.json").read_text())["instances"][0]
    assert data["instance_id"] == "b512" and data["targets"][0]["fraction"] == 0.9
    assert data["breakpoints"]["rows"][0] == [0, 0, 0.0, 0, 0.0]
    assert main(["curve", facts, "-o", str(tmp_path / "c.csv")]) == 0
    assert (tmp_path / "c.csv").read_text().splitlines()[
        0
    ] == "instance_id,capacity_blocks,capacity_bytes,capacity_gib,hit_tokens,hit_rate"
    capsys.readouterr()
    assert main(["misses", facts, "--capacity-gb", "1", "-1"]) == 0
    out = capsys.readouterr().out
    assert "cold or expired" in out and "replay with --extended" in out
    assert main(["plot", facts, "-o", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "hit_rate.svg").exists()
    assert main(["query", facts, "--capacity-gb", "nope"]) == 1
