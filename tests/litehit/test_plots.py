"""Plots stay drawable whatever capacities are asked (finite ones far past any plateau included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from litehit.cli import main


def test_plot_at_an_astronomical_capacity_draws_the_plateau(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(data_dir / "conversation_trace.jsonl")
    assert main(["replay", trace, "-o", str(tmp_path / "facts")]) == 0
    out = tmp_path / "plots"
    assert (
        main(["plot", str(tmp_path / "facts" / "litehit_facts.csv"), "-o", str(out), "--capacity-gb", "1e300", "1"])
        == 0
    )
    capsys.readouterr()
    assert (out / "hit_rate.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "misses.svg").exists()


def test_lanes_are_told_apart_and_targets_are_marked(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two lanes with the same curve below the TTL still differ in line style and marker; each
    lane's target fractions are annotated; the miss layer is named for what it is."""
    trace = str(data_dir / "conversation_trace.jsonl")
    assert main(["replay", trace, "--ttl-seconds", "0,60", "--extended", "-o", str(tmp_path / "facts")]) == 0
    out = tmp_path / "plots"
    facts = str(tmp_path / "facts" / "litehit_facts.csv")
    assert main(["plot", facts, "-o", str(out), "--capacity", "4GiB", "20000blocks", "--targets", "0.5,0.9"]) == 0
    capsys.readouterr()
    svg = (out / "hit_rate.svg").read_text()
    assert svg.count(">50%<") == 2 and svg.count(">90%<") == 2  # one per lane and target
    assert "stroke-dasharray" in svg  # the second lane is dashed, the first solid
    assert ">4 GiB<" in svg  # the byte capacity is marked; 20000blocks has no place on a GiB axis
    misses = (out / "misses.svg").read_text()
    assert "incomplete last block" in misses and ">tail<" not in misses
