"""The sizing's picture: coverage over window length (log x), one panel per lane: the lane's
evicted misses, each category's, the target and the window reaching it (PNG or SVG)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, PercentFormatter

from litehit.lane_plots import lane_panels, save_lane_figure
from litehit.window.result import CoveragePoint, WindowResult

__all__ = ["DURATION_TICKS_S", "duration_axis", "plot_window", "seconds_label"]

MAX_CATEGORIES = 8
_UNITS = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"))
DURATION_TICKS_S = (0.1, 1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400)
"""Ticks of a log axis of durations: round ones (100 ms, 1 s, 10 s, 1 min, 10 min, 1 h, ...)."""


def duration_axis(ax: Axes) -> None:
    """A log x axis of seconds ticked at round durations (never 1.67 min or 2.78 h)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(DURATION_TICKS_S))
    ax.xaxis.set_major_formatter(FuncFormatter(seconds_label))
    ax.xaxis.set_minor_formatter(NullFormatter())


def seconds_label(x: float, _pos: object = None) -> str:
    """``100 ms``, ``10 s``, ``2 min``, ``4 h``, ``1 d``."""
    for size, unit in _UNITS:
        if x >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x * 1000:.3g} ms"


def _curve(ax: Axes, points: list[CoveragePoint], **style: object) -> None:
    if points:
        ax.plot([p.window_s for p in points], [p.coverage for p in points], **style)  # type: ignore[arg-type]


def plot_window(result: WindowResult, path: Path) -> Path:
    """Draws the sizing to path (.png or .svg), published atomically; returns the path."""
    fig, axes = lane_panels(path, len(result.lanes))
    for ax, lane in zip(axes, result.lanes, strict=False):
        categories = list(lane.categories.items()) if len(lane.categories) > 1 else []
        for name, report in categories[:MAX_CATEGORIES]:
            _curve(ax, report.coverage, marker=".", linewidth=0.9, alpha=0.7, label=name)
        _curve(ax, lane.coverage, color="#000000", marker="o", linewidth=1.8, label="all")
        ax.axhline(lane.coverage_target, color="#c62828", linestyle="--", linewidth=0.9)
        if lane.window_s > 0:
            ax.axvline(lane.window_s, color="#c62828", linestyle=":", linewidth=0.9)
            ax.annotate(
                f"W = {seconds_label(lane.window_s)} for {lane.coverage_target:.4g}",
                (lane.window_s, 0.0),
                textcoords="offset points",
                xytext=(-4, 4),
                ha="right",
                va="bottom",
                fontsize=8,
                color="#c62828",
            )
        duration_axis(ax)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("evicted misses covered")
        ax.set_title(
            f"lane {lane.lane}: {lane.policy} at {lane.capacity_gb:g} GiB ({lane.capacity_blocks:,} blocks), "
            f"{lane.outcomes.evicted:,} evicted misses",
            fontsize=10,
        )
        ax.grid(True, which="major", alpha=0.3)
        if lane.coverage:
            ax.legend(loc="upper left", fontsize=8)
    return save_lane_figure(
        fig,
        path,
        len(result.lanes),
        title="Eviction-attribution window: coverage of evicted misses",
        xlabel="window (time since the key's latest eviction)",
    )
