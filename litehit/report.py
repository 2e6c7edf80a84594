"""The report page of a facts file: one self-contained HTML file (inline CSS and SVG, no script,
no network resource) with the exact hit-rate curve of every lane, the hit rates at the asked
capacities (or a ladder of powers of two), the capacity reaching plateau fractions and absolute
hit-rate targets, the miss attribution and the provenance of the facts.

Every number comes from the existing computations: ``exact_curves`` (curves and targets),
``LaneSummary`` (targets per lane), ``query_facts`` (the table, the same numbers as
``litehit query``) and ``attribute_misses``. Every string that comes from the facts or the
replay config (instance ids, paths, config values) is HTML-escaped.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from litehit import package_version
from litehit.capacity import GIB, CapacitySlot, counted, format_bytes
from litehit.curve import CurvePoint, InstanceCurve, exact_curves
from litehit.errors import ConfigError
from litehit.kv_models import assumed_kv_note
from litehit.lane_summary import PLATEAU_FRACTIONS, LaneSummary, capacity_ladder
from litehit.misses import Attribution, attribute_misses
from litehit.query import QueryResult, query_facts
from litehit.spec import parse_replay_spec

__all__ = [
    "FactsFile",
    "ReplayRecord",
    "build_report",
    "default_capacities",
    "describe_facts_file",
    "package_version",
]

MAX_RUNGS = 16  # rows of the default capacity ladder


@dataclass(frozen=True)
class FactsFile:
    """The facts file as the page names it: label (path as given, or storage path), size, sha256."""

    label: str
    size_bytes: int
    sha256: str


def describe_facts_file(path: Path, label: str | None = None) -> FactsFile:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return FactsFile(label if label is not None else str(path), path.stat().st_size, digest.hexdigest())


@dataclass(frozen=True)
class ReplayRecord:
    """What is known of the replay that wrote the facts: its job, config, trace and statistics."""

    job_id: str | None
    config: dict[str, Any] | None
    trace: Mapping[str, Any] = field(default_factory=dict)  # shown as given: name, format, size, sha256 ...
    stats: Mapping[str, Any] = field(default_factory=dict)
    finished_at: datetime | None = None

    def setups(self) -> dict[str, tuple[int, int]]:
        """instance id -> (block size in tokens, TTL in seconds), from the config when it parses."""
        if not self.config:
            return {}
        try:
            spec = parse_replay_spec({"trace_file_path": "<trace>", "output_result_path": "<out>", **self.config})
        except (ConfigError, TypeError, ValueError):
            return {}
        return {i.instance_id: (i.block_size, spec.group_of(i).ttl_seconds) for i in spec.instances}


def default_capacities(curves: Sequence[InstanceCurve]) -> list[CapacitySlot]:
    """The union of the lanes' ladders (powers of two bytes up to each plateau; the top
    MAX_RUNGS), then the infinite capacity. A power of two bytes is exact in GiB."""
    rungs = sorted({b for c in curves for b in capacity_ladder(c)})[-MAX_RUNGS:]
    return [*(CapacitySlot(b / GIB) for b in rungs), CapacitySlot(-1.0)]


def build_report(
    facts: Path,
    *,
    facts_file: FactsFile,
    version: str,
    generated_at: datetime,
    capacities: Sequence[CapacitySlot] = (),
    plateau_fractions: Sequence[float] = PLATEAU_FRACTIONS,
    hit_rate_targets: Sequence[float] = (),
    replay: ReplayRecord | None = None,
    context: Mapping[str, str] | None = None,
    tiers: Mapping[str, Any] | None = None,
) -> str:
    """The page for the facts file at ``facts``. Without capacities, a default ladder. ``context``
    adds lines to the provenance (e.g. the query job of the service); ``tiers`` (a tiers.json
    document, litehit.tiers.document) adds its section."""
    curves = exact_curves(facts, plateau_fractions)
    slots = list(capacities) or default_capacities(curves)
    result = query_facts(facts, slots)
    extended, misses = attribute_misses(facts, slots)
    notes: list[str] = []
    setups = replay.setups() if replay else {}
    recorded_rows = replay.stats.get("facts_rows") if replay else None
    if recorded_rows is not None and recorded_rows != result.rows:
        notes.append(
            f"The replay record names {recorded_rows:,} facts rows, this file has {result.rows:,}: "
            "the file changed after that replay, so its config is not used for the lanes."
        )
        setups = {}
    elif replay and replay.config and (kv_note := assumed_kv_note(replay.config)):
        notes.append(kv_note.removeprefix("note: "))
    lanes = []
    for c in curves:
        block_size, ttl = setups.get(c.instance_id, (None, None))
        lanes.append(LaneSummary(c, block_size, ttl, hit_rate_targets))
    page = _Page(lanes, slots, result, extended, misses, asked=bool(capacities))
    body = [
        f"<h1>LiteHit report: {_e(Path(facts_file.label).name)}</h1>",
        f'<p class="lede">{_e(_lede(lanes, result))}</p>',
        *(f'<p class="note">{_e(n)}</p>' for n in notes),
        page.curves_section(),
        page.summary_section(),
        page.table_section(),
        page.misses_section(),
        *([tiers_section(tiers)] if tiers is not None else []),
        _provenance(facts_file, result, extended, version, generated_at, replay, context or {}),
    ]
    title = f"LiteHit report: {Path(facts_file.label).name}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(rate: float) -> str:
    return f"{rate:.2%}"


def _lede(lanes: Sequence[LaneSummary], result: QueryResult) -> str:
    return (
        f"{len(lanes)} lane{'s' if len(lanes) != 1 else ''}, {result.rows:,} facts rows (one per request and lane). "
        "Hit rate = prefix-hit tokens / input tokens under exact LRU, at every capacity; "
        "lanes are never summed."
    )


def _where(p: CurvePoint) -> str:
    blocks = f" ({counted(p.capacity_blocks, 'block')})" if p.capacity_blocks is not None else ""
    return f"{format_bytes(p.capacity_bytes)}{blocks}"


def _setup(lane: LaneSummary) -> str:
    """'512 tokens/block, 1 MiB/block, TTL 60 s' (the parts known)."""
    c = lane.curve
    parts = [f"{lane.block_size:,} tokens/block"] if lane.block_size is not None else []
    parts.append("mixed block sizes" if c.block_bytes is None else f"{format_bytes(c.block_bytes)}/block")
    if lane.ttl_seconds is not None:
        parts.append(f"TTL {lane.ttl_seconds} s" if lane.ttl_seconds else "no TTL")
    return ", ".join(parts)


def _reached(p: CurvePoint) -> str:
    """A table cell: the hit rate, then (on its own line) from which capacity."""
    return f'<td class="reached">{_pct(p.hit_rate)} <span class="where">from {_e(_where(p))}</span></td>'


def _slot_label(slot: CapacitySlot) -> str:
    """'infinite', '512 GiB' (any capacity with bytes), '20,000 blocks', '1,000,000 tokens'."""
    if slot.infinite:
        return "infinite"
    return slot.label if slot.per_lane else format_bytes(slot.capacity_bytes)


def _asked_as(slot: CapacitySlot) -> str:
    """The capacity as given: a number of GiB, or the text with its unit."""
    if slot.infinite:
        return "inf"
    return f"{slot.capacity_gb:g} GiB" if slot.unit == "GiB" else slot.label


def _blocks_cell(slot: CapacitySlot, lane: LaneSummary) -> str:
    """The lane's blocks at this capacity; empty when infinite or unknown (mixed block bytes, or
    tokens without the lane's block size)."""
    block_bytes = lane.curve.block_bytes
    if slot.infinite or block_bytes is None or (slot.unit == "tokens" and lane.block_size is None):
        return ""
    blocks = slot.blocks(block_bytes, lane.block_size or 1)
    return "" if blocks is None else f"{blocks:,}"


# Okabe-Ito colours (colour-blind safe), with a dash pattern and a marker each: lanes with the
# same curve stay apart.
_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C6D1F")
_DASHES = ("", "7 3", "2 3", "9 3 2 3", "4 2", "12 4", "1 2", "6 2 1 2 1 2")
_MARKERS = ("circle", "square", "triangle", "diamond", "cross", "triangle-down", "plus", "star")


@dataclass(frozen=True)
class _Style:
    colour: str
    dash: str
    marker: str


def _style(i: int) -> _Style:
    return _Style(_COLOURS[i % len(_COLOURS)], _DASHES[i % len(_DASHES)], _MARKERS[i % len(_MARKERS)])


def _marker(kind: str, x: float, y: float, colour: str, size: float = 4.5, filled: bool = True) -> str:
    fill = colour if filled else "#fff"
    common = f'fill="{fill}" stroke="{colour}" stroke-width="1.5"'
    s = size
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}" {common}/>'
    if kind == "square":
        return f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" {common}/>'
    points = {
        "triangle": [(0, -1.2), (1.1, 0.8), (-1.1, 0.8)],
        "triangle-down": [(0, 1.2), (1.1, -0.8), (-1.1, -0.8)],
        "diamond": [(0, -1.3), (1.1, 0), (0, 1.3), (-1.1, 0)],
        "star": [
            (0, -1.3),
            (0.35, -0.4),
            (1.25, -0.4),
            (0.5, 0.15),
            (0.8, 1.1),
            (0, 0.5),
            (-0.8, 1.1),
            (-0.5, 0.15),
            (-1.25, -0.4),
            (-0.35, -0.4),
        ],
    }
    if kind in points:
        pts = " ".join(f"{x + dx * s:.1f},{y + dy * s:.1f}" for dx, dy in points[kind])
        return f'<polygon points="{pts}" {common}/>'
    a = s * (0.8 if kind == "cross" else 1.1)
    lines = [(-a, -a, a, a), (-a, a, a, -a)] if kind == "cross" else [(-a, 0, a, 0), (0, -a, 0, a)]
    return "".join(
        f'<line x1="{x + x1:.1f}" y1="{y + y1:.1f}" x2="{x + x2:.1f}" y2="{y + y2:.1f}" stroke="{colour}" '
        'stroke-width="2"/>'
        for x1, y1, x2, y2 in lines
    )


@dataclass
class _Axes:
    """A log2 capacity axis (bytes) by a linear hit-rate axis, with its plot area in pixels."""

    lo: float  # log2 bytes at the left edge
    hi: float
    y_top: float  # hit rate at the top edge
    left: float = 70.0
    top: float = 16.0
    width: float = 520.0
    height: float = 250.0

    def x(self, capacity_bytes: float) -> float:
        v = math.log2(max(capacity_bytes, 1.0))
        v = min(max(v, self.lo), self.hi)
        return self.left + (v - self.lo) / (self.hi - self.lo) * self.width

    def y(self, rate: float) -> float:
        return self.top + self.height - min(rate, self.y_top) / self.y_top * self.height

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def frame(self) -> str:
        """Grid, ticks with readable units, axis titles."""
        out = [f'<rect x="{self.left}" y="{self.top}" width="{self.width}" height="{self.height}" class="plot-area"/>']
        span = self.hi - self.lo
        step = next(k for k in (1, 2, 5, 10, 20) if span / k <= 8)
        for e in range(math.ceil(self.lo), math.floor(self.hi) + 1):
            x = self.x(2.0**e)
            major = e % step == 0
            out.append(
                f'<line x1="{x:.1f}" y1="{self.top}" x2="{x:.1f}" y2="{self.bottom}" '
                f'class="{"grid" if major else "grid minor"}"/>'
            )
            if major:
                out.append(
                    f'<text x="{x:.1f}" y="{self.bottom + 16}" class="tick" text-anchor="middle">'
                    f"{_e(format_bytes(1 << e) if e >= 0 else '')}</text>"
                )
        ystep = next(s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25) if self.y_top / s <= 6)
        for k in range(round(self.y_top / ystep) + 1):
            rate = k * ystep
            y = self.y(rate)
            out.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" class="grid"/>')
            out.append(f'<text x="{self.left - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{rate:.0%}</text>')
        out.append(
            f'<text x="{self.left + self.width / 2:.1f}" y="{self.bottom + 36}" class="axis-title" '
            'text-anchor="middle">cache capacity (log scale; binary units)</text>'
        )
        out.append(
            f'<text x="16" y="{self.top + self.height / 2:.1f}" class="axis-title" text-anchor="middle" '
            f'transform="rotate(-90 16 {self.top + self.height / 2:.1f})">hit rate</text>'
        )
        return "".join(out)

    def step_path(self, curve: InstanceCurve, samples: int = 700) -> str:
        """The step function sampled at `samples` points evenly spaced on the log axis (at least
        one per pixel): exact at every sample, drawn as horizontal and vertical moves."""
        caps = np.exp2(np.linspace(self.lo, self.hi, samples))
        idx = np.searchsorted(np.asarray(curve.capacity_bytes, dtype=np.float64), caps, side="right") - 1
        tokens = np.where(idx >= 0, curve.hit_tokens[np.maximum(idx, 0)], 0)
        rates = tokens / curve.input_tokens if curve.input_tokens else np.zeros(samples)
        xs = [self.x(float(c)) for c in caps]
        ys = [self.y(float(r)) for r in rates]
        parts = [f"M{xs[0]:.1f},{ys[0]:.1f}"]
        for i in range(1, samples):
            if ys[i] != ys[i - 1]:
                parts.append(f"H{xs[i]:.1f}V{ys[i]:.1f}")
        parts.append(f"H{xs[-1]:.1f}")
        return "".join(parts)


def _axes_for(curves: Sequence[InstanceCurve], asked: Sequence[int], **geometry: float) -> _Axes:
    """Axes spanning the curves from their first hit to their plateaus, and the asked capacities (bytes)."""
    firsts = [c.capacity_bytes[1] for c in curves if len(c) > 1]
    tops = [c.plateau.capacity_bytes for c in curves if len(c) > 1]
    lo_bytes = min([*firsts, *asked], default=1 << 20)
    hi_bytes = max([*tops, *asked], default=1 << 30)
    lo = math.floor(math.log2(lo_bytes)) - 1
    hi = max(math.ceil(math.log2(hi_bytes)) + 1, lo + 2)
    top = max([c.plateau.hit_rate for c in curves] + [0.0])
    y_top = max(0.05, math.ceil(top * 1.08 * 20) / 20)
    return _Axes(float(lo), float(hi), y_top, **geometry)


class _Page:
    def __init__(
        self,
        lanes: Sequence[LaneSummary],
        slots: Sequence[CapacitySlot],
        result: QueryResult,
        extended: bool,
        misses: Sequence[Attribution],
        *,
        asked: bool,
    ) -> None:
        self.lanes, self.slots, self.result, self.extended, self.misses = lanes, slots, result, extended, misses
        self.asked = asked  # capacities given by the user (marked on the charts), not the default ladder
        self.marked = [s for s in slots if asked and not s.infinite]  # drawn where their bytes are known
        self.styles = {lane.curve.instance_id: _style(i) for i, lane in enumerate(lanes)}

    # -- charts -------------------------------------------------------------------------------

    def curves_section(self) -> str:
        out = [
            '<section id="curves"><h2>Hit rate over capacity</h2>',
            '<p class="hint">Exact step functions from the facts (every breakpoint counts), all lanes first, '
            "then one chart per lane. Dotted vertical lines: asked capacities. Hollow markers: the capacity "
            "reaching each fraction of the plateau and each asked hit rate.</p>",
        ]
        if len(self.lanes) > 1:
            out.append('<figure class="chart-box">' + self._overview() + "</figure>")
        out.append('<div class="lane-charts">')
        for lane in self.lanes:
            caption = f"{lane.curve.instance_id}: {_setup(lane)}"
            out.append(
                f'<figure class="chart-box"><figcaption>{_e(caption)}</figcaption>{self._lane_chart(lane)}</figure>'
            )
        out.append("</div></section>")
        return "\n".join(out)

    def _marked_bytes(self, lane: LaneSummary | None) -> list[int]:
        """The asked capacities in bytes: in a lane (blocks and tokens by its block bytes and size,
        when known), or for all lanes (only the capacities with bytes of their own)."""
        out = []
        for slot in self.marked:
            if not slot.per_lane:
                out.append(slot.capacity_bytes)
            elif lane is not None and _blocks_cell(slot, lane):  # the lane's blocks are known
                blocks = slot.blocks(lane.curve.block_bytes or 1, lane.block_size or 1) or 0
                out.append(blocks * (lane.curve.block_bytes or 0))
        return [b for b in out if b > 0]

    def _asked_lines(self, axes: _Axes, marked: Sequence[int]) -> list[str]:
        out = []
        for capacity_bytes in marked:
            x = axes.x(capacity_bytes)
            out.append(f'<line x1="{x:.1f}" y1="{axes.top}" x2="{x:.1f}" y2="{axes.bottom}" class="asked"/>')
        return out

    def _legend(self, x: float, y: float, entries: Sequence[tuple[str, str]]) -> str:
        """Entries (symbol svg at 0,0 .. 28,0; label) stacked from (x, y), outside the axes."""
        out = [f'<g class="legend" transform="translate({x:.1f},{y:.1f})">']
        for i, (symbol, label) in enumerate(entries):
            out.append(
                f'<g transform="translate(0,{i * 20})">{symbol}'
                f'<text x="36" y="4" class="legend-text">{_e(label)}</text></g>'
            )
        out.append("</g>")
        return "".join(out)

    def _lane_symbol(self, style: _Style) -> str:
        return (
            f'<line x1="0" y1="0" x2="28" y2="0" stroke="{style.colour}" stroke-width="2.2" '
            f'stroke-dasharray="{style.dash}"/>' + _marker(style.marker, 14, 0, style.colour, 4)
        )

    def _lane_marks(self, axes: _Axes, lane: LaneSummary, style: _Style, phase: int, count: int) -> list[str]:
        """The curve's path and its lane markers at staggered positions (so equal curves stay apart)."""
        c = lane.curve
        out = [
            f'<path d="{axes.step_path(c)}" fill="none" stroke="{style.colour}" stroke-width="2.2" '
            f'stroke-dasharray="{style.dash}" class="curve"/>'
        ]
        for k in range(6):
            t = (k + (phase + 0.5) / max(count, 1)) / 6
            log_cap = axes.lo + t * (axes.hi - axes.lo)
            rate = c.hit_tokens_at(int(2.0**log_cap)) / c.input_tokens if c.input_tokens else 0.0
            out.append(_marker(style.marker, axes.x(2.0**log_cap), axes.y(rate), style.colour))
        return out

    def _overview(self) -> str:
        marked = self._marked_bytes(None)
        axes = _axes_for([lane.curve for lane in self.lanes], marked, width=560.0)
        legend_x = axes.right + 24
        height = max(axes.bottom + 48, 24 + 20 * len(self.lanes) + 40)
        out = [
            f'<svg class="chart overview" width="{legend_x + 260:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {legend_x + 260:.0f} {height:.0f}" role="img" '
            'aria-label="hit rate over capacity, all lanes">',
            "<title>Hit rate over capacity, all lanes</title>",
            axes.frame(),
            *self._asked_lines(axes, marked),
        ]
        entries = []
        for i, lane in enumerate(self.lanes):
            style = self.styles[lane.curve.instance_id]
            out += self._lane_marks(axes, lane, style, i, len(self.lanes))
            entries.append(
                (self._lane_symbol(style), f"{lane.curve.instance_id} ({_pct(lane.curve.plateau.hit_rate)})")
            )
        out.append(self._legend(legend_x, axes.top + 8, entries))
        out.append("</svg>")
        return "".join(out)

    def _lane_chart(self, lane: LaneSummary) -> str:
        c = lane.curve
        style = self.styles[c.instance_id]
        marked = self._marked_bytes(lane)
        axes = _axes_for([c], marked, width=520.0)
        legend_x = axes.right + 24
        out = [
            f'<svg class="chart lane-curve" data-instance="{_e(c.instance_id)}" '
            f'width="{legend_x + 330:.0f}" height="{axes.bottom + 48:.0f}" '
            f'viewBox="0 0 {legend_x + 330:.0f} {axes.bottom + 48:.0f}" role="img" '
            f'aria-label="hit rate over capacity, lane {_e(c.instance_id)}">',
            f"<title>Hit rate over capacity: {_e(c.instance_id)}</title>",
            axes.frame(),
            *self._asked_lines(axes, marked),
            f'<line x1="{axes.left}" y1="{axes.y(c.plateau.hit_rate):.1f}" x2="{axes.right}" '
            f'y2="{axes.y(c.plateau.hit_rate):.1f}" class="plateau"/>',
        ]
        for rate in lane.hit_rate_targets:
            if rate > axes.y_top:
                continue  # above the plateau: not reachable, said in the legend
            y = axes.y(rate)
            out.append(f'<line x1="{axes.left}" y1="{y:.1f}" x2="{axes.right}" y2="{y:.1f}" class="target-line"/>')
        out += self._lane_marks(axes, lane, style, 0, 1)
        entries = [
            (self._lane_symbol(style), str(c.instance_id)),
            (
                '<line x1="0" y1="0" x2="28" y2="0" class="plateau"/>',
                f"plateau {_pct(c.plateau.hit_rate)} from {format_bytes(c.plateau.capacity_bytes)}",
            ),
        ]
        for f, i in sorted(c.targets.items()):
            t = c.point(i)
            mark = _marker("circle", axes.x(t.capacity_bytes), axes.y(t.hit_rate), "#444", 5, False)
            out.append(f'<g class="target" data-fraction="{f!r}">{mark}</g>')
        if c.targets:
            fractions = ", ".join(f"{f:.0%}" for f in sorted(c.targets))
            entries.append((_marker("circle", 14, 0, "#444", 5, False), f"{fractions} of the plateau"))
        for rate in lane.hit_rate_targets:
            p = lane.hit_rate_target(rate)
            if p is not None:
                out.append(
                    f'<g class="target" data-hit-rate="{rate!r}">'
                    f"{_marker('diamond', axes.x(p.capacity_bytes), axes.y(p.hit_rate), '#B00020', 5.5, False)}</g>"
                )
            label = f"hit rate {_pct(rate)}: " + (f"from {format_bytes(p.capacity_bytes)}" if p else "not reachable")
            entries.append(
                (
                    '<line x1="0" y1="0" x2="28" y2="0" class="target-line"/>'
                    + _marker("diamond", 14, 0, "#B00020", 5, False),
                    label,
                )
            )
        if marked:
            entries.append(('<line x1="14" y1="-8" x2="14" y2="8" class="asked"/>', "asked capacities"))
        out.append(self._legend(legend_x, axes.top + 8, entries))
        out.append("</svg>")
        return "".join(out)

    # -- tables -------------------------------------------------------------------------------

    def summary_section(self) -> str:
        fractions = sorted({f for lane in self.lanes for f in lane.curve.targets})
        rates = list(dict.fromkeys(r for lane in self.lanes for r in lane.hit_rate_targets))
        head = (
            "<tr><th>lane</th><th>setup</th><th>requests</th><th>plateau</th>"
            + "".join(f"<th>{f:.0%} of plateau</th>" for f in fractions)
            + "".join(f"<th>hit rate {_pct(r)}</th>" for r in rates)
            + "</tr>"
        )
        rows = []
        for lane in self.lanes:
            c = lane.curve
            cells = [
                f'<th scope="row">{_e(c.instance_id)}</th>',
                f'<td class="setup">{_e(_setup(lane))}</td>',
                f'<td class="reached">{c.requests:,} <span class="where">{c.input_tokens:,} input tokens</span></td>',
                _reached(c.plateau),
            ]
            for f in fractions:
                i = c.targets.get(f)
                cells.append("<td></td>" if i is None else _reached(c.point(i)))
            for r in rates:
                p = lane.hit_rate_target(r)
                plateau = _pct(c.plateau.hit_rate)
                cells.append(
                    f"<td>{_e(_where(p))}</td>"
                    if p
                    else f'<td class="unreachable">not reachable (plateau {plateau})</td>'
                )
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return (
            '<section id="targets"><h2>Plateau and targets per lane</h2>'
            '<p class="hint">The smallest capacity reaching each fraction of the lane\'s infinite-capacity hit '
            "rate (the plateau) and each absolute hit rate asked for.</p>"
            f'<div class="scroll"><table class="summary"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            "</table></div></section>"
        )

    def table_section(self) -> str:
        by_id = {(s.instance_id or b"").decode("utf-8", "replace"): s for s in self.result.instances}
        head = "<tr><th>capacity</th><th>asked as</th>" + "".join(
            f'<th colspan="2">{_e(lane.curve.instance_id)}</th>' for lane in self.lanes
        )
        sub = "<tr><th></th><th></th>" + "<th>hit rate</th><th>blocks</th>" * len(self.lanes) + "</tr>"
        rows = []
        for k, slot in enumerate(self.slots):
            cells = [
                f'<th scope="row">{_e(_slot_label(slot))}</th>',
                f"<td>{_e(_asked_as(slot))}</td>",
            ]
            for lane in self.lanes:
                c = lane.curve
                summary = by_id[c.instance_id]
                rate = summary.hit_rates[k]
                blocks = _blocks_cell(slot, lane)
                cells.append(
                    f'<td class="rate" data-instance="{_e(c.instance_id)}" data-slot="{k}" '
                    f'data-capacity-gb="{_e(slot.recorded_gb)}" data-hit-rate="{rate!r}" '
                    f'data-hit-tokens="{summary.total_hit_tokens[k]}">{_pct(rate)}</td><td>{blocks}</td>'
                )
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return (
            f'<section id="table"><h2>{"Hit rate at the asked capacities" if self.asked else "Hit rate at powers of two up to the plateau"}</h2>'
            '<p class="hint">The numbers of <code>litehit query</code> at these capacities '
            "(binary units; blocks = capacity / bytes per block, rounded down).</p>"
            f'<div class="scroll"><table class="capacities"><thead>{head}</tr>{sub}</thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div></section>"
        )

    def misses_section(self) -> str:
        if self.extended:
            parts = [
                ("hit", "hit", "#009E73"),
                ("evicted", "evicted (capacity)", "#D55E00"),
                ("cold", "cold (never seen)", "#0072B2"),
                ("expired", "expired (TTL)", "#CC79A7"),
                ("tail", "incomplete last block", "#BBBBBB"),
            ]
        else:
            parts = [
                ("hit", "hit", "#009E73"),
                ("evicted", "evicted (capacity)", "#D55E00"),
                ("cold_or_expired", "cold or expired", "#0072B2"),
                ("tail", "incomplete last block", "#BBBBBB"),
            ]
        head = (
            "<tr><th>lane</th><th>capacity</th><th>split of the input tokens</th>"
            + "".join(f"<th>{_e(label)}</th>" for _, label, _ in parts)
            + "</tr>"
        )
        key = "".join(
            f'<span class="key"><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" '
            f'fill="{colour}"/></svg> {_e(label)}</span>'
            for _, label, colour in parts
        )
        rows = []
        for k, a in enumerate(self.misses):
            slot = self.slots[k % len(self.slots)]  # per lane, one attribution per slot in order
            den = a.input_tokens or 1
            x = 0.0
            bar = ['<svg class="bar" width="240" height="14" role="img" aria-label="token split">']
            for name, label, colour in parts:
                w = getattr(a, name) / den * 240
                if w > 0:
                    bar.append(
                        f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="14" fill="{colour}"><title>{_e(label)}</title></rect>'
                    )
                x += w
            bar.append("</svg>")
            cells = "".join(
                f'<td data-part="{name}" data-tokens="{getattr(a, name)}">{getattr(a, name) / den:.2%}</td>'
                for name, _, _ in parts
            )
            rows.append(
                "<tr>"
                + (
                    f'<th scope="row" rowspan="{len(self.slots)}">{_e(a.instance_id)}</th>'
                    if k % len(self.slots) == 0
                    else ""
                )
                + f"<td>{_e(_slot_label(slot))}</td>"
                f"<td>{''.join(bar)}</td>{cells}</tr>"
            )
        note = (
            "Extended facts: cold and TTL-expired misses are told apart exactly."
            if self.extended
            else "Plain facts report cold and expired together; replay with <code>--extended</code> to split them."
        )
        return (
            '<section id="misses"><h2>Where the input tokens go</h2>'
            f'<p class="hint">Per lane and capacity: hits, misses lost only to the capacity limit (evicted), '
            f"misses no cache size would avoid, and tokens that never fill a block. The parts add up to "
            f'the input tokens. {note}</p><p class="keys">{key}</p>'
            f'<div class="scroll"><table class="misses"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            "</table></div></section>"
        )


def tiers_section(document: Mapping[str, Any]) -> str:
    """The tier split of every lane (litehit tiers): what each tier serves, and the prefill
    estimate with every constant it used."""
    out = [
        '<section id="tiers"><h2>Cache tiers</h2>',
        f'<p class="hint">{_e(document["mode"])} tiers: '
        + _e(", ".join(f"{t['name']} {t['capacity']}" for t in document["tiers"]))
        + ". Exact from the facts: tiers 1..i serve the hits of their cumulative capacity"
        + (" (exclusive)." if document["mode"] == "exclusive" else " of tier i (inclusive).")
        + "</p>",
    ]
    for lane in document["lanes"]:
        rows = "".join(
            f'<tr><th scope="row">{_e(t["name"])}</th>'
            f"<td>{'inf' if t['capacity_blocks'] is None else format(t['capacity_blocks'], ',')}</td>"
            f'<td class="rate" data-lane="{_e(lane["lane"])}" data-tier="{_e(t["name"])}" '
            f'data-hit-rate="{t["hit_rate"]!r}">{_pct(t["hit_rate"])}</td>'
            f"<td>{_pct(t['cumulative_hit_rate'])}</td><td>{_e(format_bytes(t['bytes_loaded']))}</td></tr>"
            for t in lane["tiers"]
        )
        out.append(
            f"<h3>{_e(lane['lane'])}: {_pct(lane['hit_rate'])} of {lane['input_tokens']:,} input tokens</h3>"
            '<div class="scroll"><table class="summary"><thead><tr><th>tier</th><th>blocks</th><th>hit rate</th>'
            f"<th>cumulative</th><th>loaded</th></tr></thead><tbody>{rows}</tbody></table></div>"
        )
        if "prefill_s" in lane:
            p = lane["prefill_s"]
            saved = "" if p["saved_share"] is None else f"; {_pct(p['saved_share'])} of prefill GPU time saved"
            out.append(
                f"<p>Prefill estimate: mean {p['mean']:.3g} s, p50 {p['p50']:.3g} s, p90 {p['p90']:.3g} s, "
                f"p99 {p['p99']:.3g} s (without the cache: mean {p['uncached_mean']:.3g} s){_e(saved)}.</p>"
            )
    constants = document.get("constants") or {}
    if constants.get("model"):
        listed = ", ".join(f"{k} {v}" for k, v in constants.items() if k not in ("formula", "links", "spare"))
        links = "; ".join(
            f"{name}: {link['link']}, {link['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s, {link['latency_s'] * 1e6:g} us"
            for name, link in constants["links"].items()
        )
        out.append(
            f'<p class="note">An estimate, not a measurement: {_e(constants["formula"])}. Constants: {_e(listed)}; '
            f"links: {_e(links)}. Left out: queueing, batching, decode, kernel efficiency beyond mfu.</p>"
        )
    out += [f'<p class="note">{_e(n)}</p>' for n in document.get("notes", [])]
    out.append("</section>")
    return "".join(out)


def _provenance(
    facts_file: FactsFile,
    result: QueryResult,
    extended: bool,
    version: str,
    generated_at: datetime,
    replay: ReplayRecord | None,
    context: Mapping[str, str],
) -> str:
    items: list[tuple[str, str]] = [
        ("facts file", facts_file.label),
        ("size", f"{facts_file.size_bytes:,} bytes ({format_bytes(facts_file.size_bytes)})"),
        ("sha256", facts_file.sha256),
        ("rows", f"{result.rows:,}"),
        ("format", "extended (cold and expired split)" if extended else "plain"),
        ("instances", f"{len(result.instances)}: " + ", ".join(i.decode("utf-8", "replace") for i in _ids(result))),
        *context.items(),
        ("litehit version", version),
        ("generated", generated_at.isoformat(timespec="seconds")),
    ]
    if replay is not None:
        if replay.job_id:
            items.append(("replay job", replay.job_id))
        if replay.finished_at is not None:
            items.append(("replay finished", replay.finished_at.isoformat(timespec="seconds")))
        items += [(f"trace {k}", str(v)) for k, v in replay.trace.items()]
        items += [
            (f"replay {k.replace('_', ' ')}", f"{v:,}" if isinstance(v, int) else str(v))
            for k, v in replay.stats.items()
        ]
    else:
        items.append(("replay", "unknown: no record of the replay that wrote this file"))
    rows = "".join(f'<tr><th scope="row">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in items)
    config = ""
    if replay is not None and replay.config:
        text = json.dumps(replay.config, indent=2, sort_keys=False, default=str)
        config = f"<details open><summary>replay config</summary><pre>{_e(text)}</pre></details>"
    return (
        f'<section id="provenance"><h2>Provenance</h2><table class="provenance"><tbody>{rows}</tbody></table>'
        f"{config}</section>"
    )


def _ids(result: QueryResult) -> list[bytes]:
    return [s.instance_id or b"" for s in result.instances]


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;margin:24px auto;
max-width:1180px;padding:0 16px;color:#1b1b1b;background:#fff;line-height:1.4}
h1{font-size:1.5rem;margin:0 0 4px}h2{font-size:1.15rem;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.lede{color:#444;margin:0 0 12px}.hint{color:#555;font-size:.9rem;margin:4px 0 10px}
.note{background:#fff4e5;border-left:4px solid #E69F00;padding:6px 10px}
figure{margin:0 0 14px}figcaption{font-weight:600;font-size:.95rem;margin:4px 0}.lane-charts{display:flex;flex-direction:column;gap:6px}
svg.chart{max-width:100%;height:auto;font-size:12px}
.plot-area{fill:#fbfbfb;stroke:#888;stroke-width:1}
.grid{stroke:#dcdcdc;stroke-width:1}.grid.minor{stroke:#efefef}
.tick{fill:#333;font-size:11px}.axis-title{fill:#222;font-size:12px}
.legend-text{fill:#222;font-size:12px}
.asked{stroke:#666;stroke-width:1.2;stroke-dasharray:2 3}
.plateau{stroke:#777;stroke-width:1.2;stroke-dasharray:8 4}
.target-line{stroke:#B00020;stroke-width:1;stroke-dasharray:3 3}
table{border-collapse:collapse;font-size:.88rem;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
thead th{background:#f2f2f2}tbody th{text-align:left;font-weight:600;vertical-align:top}
table.provenance td{text-align:left;white-space:normal;word-break:break-all}
.unreachable{color:#B00020}td.setup{white-space:normal;min-width:9em;text-align:left}.reached{white-space:normal;min-width:7.5em}.reached .where{display:block;font-size:.8rem;color:#444}.scroll{overflow-x:auto}
.keys{font-size:.85rem}.key{margin-right:14px;white-space:nowrap}.key svg{vertical-align:-1px}
pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;overflow-x:auto;font-size:.8rem}
"""
