"""The hit-rate summary of a facts file, per lane: the hit rate at a ladder of capacities, the
capacity reaching 50/90/99% of the plateau and absolute hit-rate targets. Read from the facts
(the exact curves), so a replay summarises what it just published without a second trace pass.

Lanes are never summed: lanes of different block sizes or TTLs share no meaningful total."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from litehit.capacity import counted, format_bytes
from litehit.errors import QueryError

if TYPE_CHECKING:  # the curves load numpy and the engine: only when a summary is made
    from litehit.curve import CurvePoint, InstanceCurve, LaneCurves

__all__ = [
    "PLATEAU_FRACTIONS",
    "LaneSummary",
    "capacity_ladder",
    "format_bytes",
    "parse_hit_rates",
    "print_lane_summaries",
    "summarize_facts",
    "target_line",
]

PLATEAU_FRACTIONS = (0.5, 0.9, 0.99)
MAX_RUNGS = 16  # the ladder keeps its top rungs: below them the hit rate is near 0


def parse_hit_rates(text: str, flag: str = "--target-hit-rate") -> list[float]:
    """Comma separated absolute hit rates in [0, 1]."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise QueryError(f"invalid {flag}: {text}") from None
    if not values or any(not 0 <= v <= 1 for v in values):
        raise QueryError(f"{flag} must be hit rates in [0, 1], got {text}")
    return values


def capacity_ladder(curve: InstanceCurve) -> list[int]:
    """Powers of two (bytes) from the first capacity with hits up to the plateau capacity."""
    if len(curve) < 2:
        return []
    low = 1 << (curve.capacity_bytes[1].bit_length() - 1)
    top = curve.plateau.capacity_bytes
    rungs = [low]
    while rungs[-1] < top:
        rungs.append(rungs[-1] * 2)
    return rungs[-MAX_RUNGS:]


def _point_at(curve: InstanceCurve, capacity_bytes: int) -> CurvePoint:
    tokens = curve.hit_tokens_at(capacity_bytes)
    blocks = None if curve.block_bytes is None else capacity_bytes // curve.block_bytes
    from litehit.curve import CurvePoint

    return CurvePoint(capacity_bytes, blocks, tokens, tokens / curve.input_tokens if curve.input_tokens else 0.0)


@dataclass
class LaneSummary:
    curve: InstanceCurve
    block_size: int | None  # from the replay config, when known
    ttl_seconds: int | None
    hit_rate_targets: Sequence[float] = ()

    def ladder(self) -> list[CurvePoint]:
        return [_point_at(self.curve, b) for b in capacity_ladder(self.curve)]

    def hit_rate_target(self, rate: float) -> CurvePoint | None:
        i = self.curve.index_reaching_hit_rate(rate)
        return None if i is None else self.curve.point(i)

    def as_dict(self) -> dict[str, Any]:
        c = self.curve
        return {
            "instance_id": c.instance_id,
            "block_size": self.block_size,
            "ttl_seconds": self.ttl_seconds,
            "block_bytes": c.block_bytes,
            "requests": c.requests,
            "total_input_tokens": c.input_tokens,
            "plateau": c.plateau.as_dict(),
            "ladder": [p.as_dict() for p in self.ladder()],
            "plateau_fractions": [{"fraction": f, **c.point(i).as_dict()} for f, i in sorted(c.targets.items())],
            "hit_rate_targets": [
                {"target_hit_rate": r, "reachable": p is not None, **(p.as_dict() if p else {})}
                for r, p in ((r, self.hit_rate_target(r)) for r in self.hit_rate_targets)
            ],
        }


def summarize_facts(
    facts: str | Path | LaneCurves,
    setups: dict[str, tuple[int, int]] | None = None,
    hit_rate_targets: Sequence[float] = (),
) -> list[LaneSummary]:
    """One summary per instance of the facts file (or of the curves a replay accumulated as it
    wrote that file, the same); setups maps instance id -> (block size, TTL s)."""
    setups = setups or {}
    order = {name: i for i, name in enumerate(setups)}  # the config's lane order, then the others
    from litehit.curve import LaneCurves, exact_curves

    made = facts.curves(PLATEAU_FRACTIONS) if isinstance(facts, LaneCurves) else exact_curves(facts, PLATEAU_FRACTIONS)
    curves = sorted(made, key=lambda c: order.get(c.instance_id, len(order)))
    lanes = []
    for c in curves:
        block_size, ttl = setups.get(c.instance_id, (None, None))
        lanes.append(LaneSummary(c, block_size, ttl, hit_rate_targets))
    return lanes


def _where(p: CurvePoint) -> str:
    blocks = f" ({counted(p.capacity_blocks, 'block')})" if p.capacity_blocks is not None else ""
    return f"{format_bytes(p.capacity_bytes)}{blocks}"


def target_line(curve: InstanceCurve, rate: float) -> str:
    """'hit rate 30.00% from 1.5 GiB (1,536 blocks)' or '... not reachable (plateau 27.40%)'."""
    i = curve.index_reaching_hit_rate(rate)
    if i is None:
        return f"hit rate {rate:.2%}: not reachable (plateau {curve.plateau.hit_rate:.2%})"
    return f"hit rate {rate:.2%} from {_where(curve.point(i))}"


def print_lane_summaries(lanes: list[LaneSummary], stream: TextIO) -> None:
    for lane in lanes:
        c = lane.curve
        setup = [f"{lane.block_size} tokens/block"] if lane.block_size is not None else []
        setup += [f"{format_bytes(c.block_bytes)}/block"] if c.block_bytes is not None else []
        setup += [f"TTL {lane.ttl_seconds} s" if lane.ttl_seconds else "no TTL"] if lane.ttl_seconds is not None else []
        stream.write(f"lane {c.instance_id} ({', '.join(setup) or 'mixed block sizes'}): {c.requests:,} requests\n")
        stream.write(f"  plateau {c.plateau.hit_rate:.2%} from {_where(c.plateau)}\n")
        ladder = lane.ladder()
        if ladder:
            stream.write(f"  {'capacity':>12}{'blocks':>14}{'hit rate':>10}\n")
            for p in ladder:
                blocks = "" if p.capacity_blocks is None else f"{p.capacity_blocks:,}"
                stream.write(f"  {format_bytes(p.capacity_bytes):>12}{blocks:>14}{p.hit_rate:>10.2%}\n")
        for f, i in sorted(c.targets.items()):
            p = c.point(i)
            stream.write(f"  {f:.0%} of the plateau ({p.hit_rate:.2%}) from {_where(p)}\n")
        for rate in lane.hit_rate_targets:
            stream.write(f"  {target_line(c, rate)}\n")
