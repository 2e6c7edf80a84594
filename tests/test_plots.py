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
