"""The what-if's picture: the aggregate hit rate against per-replica capacity per router (the exact
curves of the state-free routers as step plots, the simulated routers' points at the asked
capacities as markers), and beside it each router's load imbalance at the asked capacities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.ticker import PercentFormatter

from litehit.lane_plots import check_plot_path

__all__ = ["plot_routes"]


DISPLAY_POINTS = 4000  # a longer curve is drawn sampled at this many capacities (pixel resolution)


def _display_steps(capacities: list[int], rates: list[float], right: float) -> tuple[list[float], list[float]]:
    """A step curve to draw up to `right`: every point, or for a long curve its value at evenly
    spaced capacities (the rate in force at each; the published curve keeps every point)."""
    import numpy as np

    if len(capacities) <= DISPLAY_POINTS:
        return [*capacities, right], [*rates, rates[-1]]
    grid = np.linspace(0.0, right, DISPLAY_POINTS)
    at = np.searchsorted(np.asarray(capacities), grid, side="right") - 1
    return grid.tolist(), np.asarray(rates)[np.maximum(at, 0)].tolist()


def plot_routes(document: dict[str, Any], path: Path) -> Path:
    from matplotlib.figure import Figure  # no pyplot: nothing global, no GUI backend

    from litehit.plots import save_figure

    check_plot_path(path)
    fig = Figure(figsize=(11, 4.2))
    curve_ax, balance_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    ends = [e["curve"]["capacity_blocks"][-1] for e in document["routers"] if e["curve"] is not None]
    asked = [c["capacity_blocks"] or 0 for e in document["routers"] for c in e["capacities"]]
    right = max([*ends, *asked], default=0) * 1.1 or 1
    for entry in document["routers"]:
        points = entry["curve"]
        if points is None:  # simulated at the asked capacities only: markers (unbounded at the right edge)
            xs = [c["capacity_blocks"] if c["capacity_blocks"] is not None else right for c in entry["capacities"]]
            curve_ax.plot(xs, [c["hit_rate"] for c in entry["capacities"]], "o", label=f"{entry['router']} (simulated)")
            continue
        total = points["input_tokens"] or 1
        xs, ys = _display_steps(points["capacity_blocks"], [t / total for t in points["hit_tokens"]], right)
        curve_ax.step(xs, ys, where="post", label=entry["router"])
    curve_ax.set_xlabel("per-replica capacity (blocks)")
    curve_ax.set_ylabel("hit rate")
    curve_ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    curve_ax.set_ylim(bottom=0)
    curve_ax.legend(fontsize=8)
    curve_ax.grid(alpha=0.3)
    labels = [c["capacity"] for c in document["routers"][0]["capacities"]] if document["routers"] else []
    width = 0.8 / max(len(document["routers"]), 1)
    for i, entry in enumerate(document["routers"]):
        values = [c["imbalance"]["max_over_mean"] for c in entry["capacities"]]
        balance_ax.bar([j + i * width for j in range(len(values))], values, width, label=entry["router"])
    balance_ax.axhline(1.0, color="grey", lw=0.8)
    balance_ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))], labels, fontsize=8)
    balance_ax.set_ylabel("max / mean prefill tokens")
    balance_ax.set_xlabel("capacity" if labels else "no capacity asked (--capacity)")
    balance_ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"routing what-if: {document['replicas']} replicas", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path.with_name(path.stem), [path.suffix.lstrip(".")])[0]
