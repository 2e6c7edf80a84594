"""The profile's pictures, one panel per lane, each as PNG and SVG (published atomically):

- ``reuse_time``: CDF of reuse times per category (log x) with its exponential fit (dashed);
- ``lifespan``: CDF of key lifespans per category of first access (log x);
- ``hit_share``: each category's share of the hit tokens and of the requests (bars);
- ``working_set``: distinct keys per 60-second window over trace time.

CDFs are drawn from the profile's log-spaced histograms, so the service draws the same pictures
from profile.json alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import PercentFormatter

from litehit.errors import ConfigError, ConfigIssue
from litehit.lane_plots import lane_panels, save_lane_figure
from litehit.profile.result import PLOT_NAMES, Histogram, LaneProfile, ProfileResult
from litehit.publish import make_output_dir
from litehit.window.plot import duration_axis

__all__ = ["PLOT_NAMES", "check_plot_dir", "plot_profile"]

SUFFIXES = (".png", ".svg")
MAX_CATEGORIES = 8
_STYLES = ("-", "--", "-.", ":")


def check_plot_dir(directory: Path) -> None:
    """The --plots folder exists or can be made (before any work)."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError([ConfigIssue("--plots", str(directory), "not a folder")])


def _cdf(ax: Axes, h: Histogram, total: int, **style: object) -> None:
    """The empirical CDF at the histogram's bin edges (the zeros drawn at the first edge)."""
    if total == 0 or not h.edges_s:
        return
    y = (h.zero + np.concatenate([[0], np.cumsum(h.counts)])) / total
    ax.step(h.edges_s, y, where="post", **style)  # type: ignore[arg-type]


def _categories(lane: LaneProfile) -> list[str]:
    names = sorted(lane.categories, key=lambda n: -lane.categories[n].hit_tokens)
    return names[:MAX_CATEGORIES] if len(names) > 1 else []


def _log_seconds(ax: Axes, ylabel: str) -> None:
    duration_axis(ax)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)


def _reuse_panel(ax: Axes, lane: LaneProfile) -> None:
    drawn = [("all", lane.overall.reuse_time)] + [(n, lane.categories[n].reuse_time) for n in _categories(lane)]
    for i, (name, r) in enumerate(drawn):
        line = _STYLES[i % len(_STYLES)]
        width = 1.8 if i == 0 else 1.0
        zeros = f", {r.histogram.zero / r.count:.0%} at 0 s (drawn at the left edge)" if r.histogram.zero else ""
        _cdf(ax, r.histogram, r.count, linestyle=line, linewidth=width, label=f"{name} ({r.count:,} reuses{zeros})")
        if r.exp_rate_per_s and r.histogram.edges_s and r.ks is not None:
            x = np.geomspace(r.histogram.edges_s[0], r.histogram.edges_s[-1], 200)
            color = ax.get_lines()[-1].get_color()
            ax.plot(
                x,
                -np.expm1(-r.exp_rate_per_s * x),
                color=color,
                linestyle=(0, (1, 2)),
                linewidth=0.9,
                label=f"  exp fit {r.exp_rate_per_s:.3g}/s, KS {r.ks:.2f}",
            )
    _log_seconds(ax, "reuses")
    ax.set_title(f"lane {lane.lane}: reuse time (since the key's previous access)", fontsize=10)
    if lane.overall.reuse_time.count:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)


def _lifespan_panel(ax: Axes, lane: LaneProfile) -> None:
    drawn = [("all", lane.overall.lifespan)] + [(n, lane.categories[n].lifespan) for n in _categories(lane)]
    for i, (name, life) in enumerate(drawn):
        _cdf(
            ax,
            life.histogram,
            life.keys,
            linestyle=_STYLES[i % len(_STYLES)],
            linewidth=1.8 if i == 0 else 1.0,
            label=f"{name} ({life.keys:,} keys, {life.never_reused_share:.0%} once)",
        )
    _log_seconds(ax, "keys")
    ax.set_title(f"lane {lane.lane}: key lifespan (last - first access; single-use keys at 0)", fontsize=10)
    if lane.overall.lifespan.keys:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)


def _share_panel(ax: Axes, lane: LaneProfile) -> None:
    names = sorted(lane.categories, key=lambda n: -lane.categories[n].hit_tokens)[: 3 * MAX_CATEGORIES]
    x = np.arange(len(names))
    requests = max(lane.overall.requests, 1)
    ax.bar(x - 0.2, [lane.categories[n].hit_token_share for n in names], 0.4, label="hit tokens")
    ax.bar(x + 0.2, [lane.categories[n].requests / requests for n in names], 0.4, label="requests", alpha=0.6)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("share of the lane")
    ax.set_title(
        f"lane {lane.lane}: who produces the hits (ideal hit ratio {lane.overall.ideal_hit_ratio:.1%})", fontsize=10
    )
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)


def _working_set_panel(ax: Axes, lane: LaneProfile) -> None:
    w = lane.overall.working_set_60s
    if w.series:
        start = w.series[0][0]
        hours = [(t - start) / 3600 for t, _ in w.series]
        ax.plot(hours, [k for _, k in w.series], marker=".", markersize=3, linewidth=0.8, label="distinct keys")
        ax.axhline(w.p50, color="#c62828", linestyle="--", linewidth=0.9, label=f"p50 {w.p50:,}")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    ax.set_ylabel(f"keys per {w.window_s:g} s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"lane {lane.lane}: working set (max {w.max:,} keys)", fontsize=10)
    ax.grid(True, alpha=0.3)


_PANELS = {
    "reuse_time": (_reuse_panel, "Reuse time CDF per category, with exponential fits", "reuse time"),
    "lifespan": (_lifespan_panel, "Key lifespan CDF per category of first access", "lifespan"),
    "hit_share": (_share_panel, "Hit-token contribution per request category", "request category"),
    "working_set": (_working_set_panel, "Working set over time", "hours since the first window"),
}


def plot_profile(result: ProfileResult, directory: Path) -> list[Path]:
    """Draws every plot of PLOT_NAMES as PNG and SVG into directory; returns the paths."""
    make_output_dir(directory)
    paths = []
    for name in PLOT_NAMES:
        draw, title, xlabel = _PANELS[name]
        for suffix in SUFFIXES:
            path = directory / f"{name}{suffix}"
            fig, axes = lane_panels(path, len(result.lanes))
            for ax, lane in zip(axes, result.lanes, strict=False):
                draw(ax, lane)
            fig.set_figwidth(10)
            paths.append(save_lane_figure(fig, path, len(result.lanes), title=title, xlabel=xlabel))
    return paths
