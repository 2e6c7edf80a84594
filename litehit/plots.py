"""Plots of facts: hit rate over capacity per instance, and where the input tokens go.

Both are drawn from the exact curve (litehit.curve) evaluated on a log-spaced capacity grid, so
files stay small whatever the number of breakpoints. PNG and SVG, no display needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # keep text as text: searchable, smaller files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter  # noqa: E402

from litehit.capacity import GIB, CapacitySlot  # noqa: E402
from litehit.curve import InstanceCurve, exact_curves  # noqa: E402
from litehit.misses import Attribution, attribute_misses  # noqa: E402
from litehit.publish import make_output_dir  # noqa: E402

__all__ = ["binary_capacity_axis", "plot_facts", "save_figure"]

MAX_PANELS = 8
MAX_AXIS_GIB = 2.0**40  # capacities asked beyond 1 ZiB are drawn at 1 ZiB (the rate is the plateau's long before)
COLORS = {
    "hit": "#2e7d32",
    "evicted": "#f9a825",
    "cold": "#1565c0",
    "expired": "#8e24aa",
    "cold_or_expired": "#1565c0",
    "tail": "#9e9e9e",
}
LABELS = {"cold_or_expired": "cold or expired", "tail": "incomplete last block"}
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _gib_label(x: float, _pos: object = None) -> str:
    for scale, unit in ((1024.0, "TiB"), (1.0, "GiB"), (1 / 1024, "MiB"), (1 / 1024**2, "KiB")):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x * 1024**3:.3g} B"


def binary_capacity_axis(ax: Axes) -> None:
    """Log x axis with ticks at powers of 4 of binary units (1 MiB, 4 MiB, ..., 1 GiB, 4 GiB)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(_gib_label))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _grid(curves: Sequence[InstanceCurve], extra: Sequence[float]) -> np.ndarray:
    """Log-spaced capacities (GiB) covering every curve from its first hit to past its plateau."""
    lows = [c.capacity_bytes[1] for c in curves if len(c) > 1]
    highs = [c.plateau.capacity_bytes for c in curves if len(c) > 1]
    if not lows:
        return np.array([1.0])
    asked = [min(x, MAX_AXIS_GIB) * GIB for x in extra if x > 0]  # past the plateau the rate is flat
    lo = min(lows + asked) / GIB
    hi = max(highs + asked) / GIB
    return np.geomspace(lo / 1.5, hi * 1.5, 400)


def _rates_on(curve: InstanceCurve, grid_gib: np.ndarray) -> np.ndarray:
    den = curve.input_tokens or 1
    return np.array([curve.hit_tokens_at(CapacitySlot(float(g)).capacity_bytes) / den for g in grid_gib])


def plot_facts(
    facts: str | Path,
    out_dir: str | Path,
    *,
    capacities: Sequence[CapacitySlot] = (),
    targets: Sequence[float] = (),
    formats: Sequence[str] = ("png", "svg"),
) -> list[Path]:
    """Writes hit_rate.{png,svg} and misses.{png,svg} into out_dir; returns the files. Each lane
    has its own colour, line style and marker; the asked capacities are marked, and so is where
    each lane reaches each target fraction of its plateau."""
    out = Path(out_dir)
    curves = exact_curves(facts, targets) if targets else exact_curves(facts)
    extended, parts = attribute_misses(facts, [CapacitySlot(-1.0)])  # both reads before any file is written
    make_output_dir(out)
    marks = [  # a capacity in blocks or tokens has no place on one GiB axis
        min(s.capacity_bytes / GIB, MAX_AXIS_GIB)
        for s in capacities
        if not s.infinite and not s.per_lane and s.capacity_bytes > 0
    ]
    grid = _grid(curves, marks)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(11, 5.5), layout="constrained")
    for i, curve in enumerate(curves):
        color = f"C{i % 10}"
        ax.step(
            grid,
            _rates_on(curve, grid),
            where="post",
            color=color,
            lw=1.8,
            ls=LINE_STYLES[i % len(LINE_STYLES)],
            marker=MARKERS[i % len(MARKERS)],
            markevery=(i * 7 % 40, 40),  # staggered, so lanes on the same curve stay apart
            markersize=5,
            label=f"{curve.instance_id}  (∞: {curve.plateau.hit_rate:.1%})",
        )
        ax.axhline(curve.plateau.hit_rate, color=color, ls=(0, (1, 3)), lw=0.9, alpha=0.7)
        for k, (fraction, index) in enumerate(sorted(curve.targets.items())):
            point = curve.point(index)
            x = min(max(point.capacity_bytes, 1) / GIB, MAX_AXIS_GIB)
            ax.plot([x], [point.hit_rate], marker=MARKERS[i % len(MARKERS)], ms=9, mfc="none", mec=color, mew=1.6)
            ax.annotate(  # targets close on the curve (90, 95, 99 %): their labels step down, never overlap
                f"{fraction:.0%}",
                (x, point.hit_rate),
                textcoords="offset points",
                xytext=(6, -11 - 9 * k),
                fontsize=7,
                color=color,
            )
    for x in marks:
        ax.axvline(x, color="0.35", ls=":", lw=1)
        ax.annotate(
            _gib_label(x),
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
            color="0.3",
        )
    binary_capacity_axis(ax)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, max([c.plateau.hit_rate for c in curves] + [0.05]) * 1.08)
    ax.set_xlabel("KV-cache capacity per instance (binary units, log scale)")
    ax.set_ylabel("prefix hit rate (tokens)")
    title = "Exact LRU prefix hit rate vs capacity (dotted: infinite capacity"
    ax.set_title(title + (", hollow markers: target fractions of it)" if targets else ")"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, title="instance")
    written += save_figure(fig, out / "hit_rate", formats)

    shown = curves[:MAX_PANELS]
    fig, axes = plt.subplots(
        len(shown), 1, figsize=(9, 2.6 * len(shown) + 0.8), squeeze=False, sharex=True, layout="constrained"
    )
    for ax, curve in zip(axes[:, 0], shown, strict=True):
        whole: Attribution = next(p for p in parts if p.instance_id == curve.instance_id)
        den = whole.input_tokens or 1
        hit = _rates_on(curve, grid)
        infinite = whole.hit / den
        layers = {"hit": hit, "evicted": infinite - hit}
        if extended:
            layers["cold"] = np.full_like(grid, (whole.cold or 0) / den)
            layers["expired"] = np.full_like(grid, (whole.expired or 0) / den)
        else:
            layers["cold_or_expired"] = np.full_like(grid, whole.cold_or_expired / den)
        layers["tail"] = np.full_like(grid, whole.tail / den)
        ax.stackplot(
            grid,
            *layers.values(),
            labels=[LABELS.get(k, k) for k in layers],
            colors=[COLORS[k] for k in layers],
            alpha=0.9,
            step="post",
        )
        for x in marks:
            ax.axvline(x, color="0.2", ls=":", lw=1)
        binary_capacity_axis(ax)
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel("input tokens")
        ax.set_title(f"{curve.instance_id}: where the input tokens go", fontsize=10)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    axes[-1, 0].set_xlabel("KV-cache capacity per instance (binary units, log scale)")
    if len(curves) > MAX_PANELS:
        fig.suptitle(f"first {MAX_PANELS} of {len(curves)} instances")
    written += save_figure(fig, out / "misses", formats)
    return written


def save_figure(fig: Figure, stem: Path, formats: Sequence[str]) -> list[Path]:
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        tmp = path.with_name(path.name + ".tmp")
        fig.savefig(tmp, format=fmt, dpi=130)
        tmp.replace(path)
        paths.append(path)
    plt.close(fig)
    return paths
