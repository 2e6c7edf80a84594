"""What a replay reports: where it published its facts and what it read (the CLI prints it; the
replay kind, litehit.jobs.replay, makes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from litehit.spec import TraceFormat

if TYPE_CHECKING:
    from litehit.curve import LaneCurves

__all__ = ["FACTS_FILE", "LaneStats", "ReplayResult"]

FACTS_FILE = "litehit_facts.csv"


@dataclass(frozen=True, slots=True)
class LaneStats:
    """What one lane saw over a whole replay, and the size of its core at the end."""

    instance_id: str
    requests: int
    blocks: int
    unique_blocks: int
    memory_bytes: int
    expired_blocks: int
    shares_core_with: str | None = None  # in process: the lane whose core (and memory) it shares


@dataclass(frozen=True)
class ReplayResult:
    facts_path: Path
    trace_format: TraceFormat
    lines: int
    rows: int
    reads: int
    facts_rows: int
    blocks: int
    elapsed_s: float
    lanes: list[LaneStats] = field(default_factory=list)
    # the facts file's exact curves, accumulated as the lanes replayed (LaneCurves.curves makes
    # them); None when a lane is hybrid (its summary reads the facts file)
    curves: LaneCurves | None = field(default=None, compare=False, repr=False)
