"""Pictures of a tier split and of a plan, one panel per lane (litehit.lane_plots).

- ``tiers``: a bar per tier with the share of the lane's input tokens it serves, and the
  cumulative hit rate above it; with a prefill model, the mean estimate with and without cache.
- ``plan``: the frontier, cost per hour against hit rate, with the best configuration marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litehit.lane_plots import MAX_PANELS, lane_panels, save_lane_figure

__all__ = ["plot_plan", "plot_tiers"]

COLORS = ("#2e7d32", "#1565c0", "#f9a825", "#8e24aa", "#00838f", "#6d4c41", "#c62828", "#9e9e9e")


def plot_tiers(document: dict[str, Any], path: Path) -> Path:
    lanes = document["lanes"]
    fig, axes = lane_panels(path, max(len(lanes), 1))
    for ax, lane in zip(axes, lanes[:MAX_PANELS], strict=False):
        tiers = lane["tiers"]
        names = [t["name"] for t in tiers]
        rates = [100 * t["hit_rate"] for t in tiers]
        bars = ax.bar(names, rates, color=[COLORS[i % len(COLORS)] for i in range(len(tiers))])
        for bar, tier in zip(bars, tiers, strict=True):
            ax.annotate(
                f"{100 * tier['hit_rate']:.1f}% (cum. {100 * tier['cumulative_hit_rate']:.1f}%)",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        title = f"lane {lane['lane']}: hit rate {100 * lane['hit_rate']:.2f}%"
        if "prefill_s" in lane:
            p = lane["prefill_s"]
            title += f"; mean prefill estimate {p['mean']:.3g} s (uncached {p['uncached_mean']:.3g} s)"
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("input tokens served (%)")
        ax.set_ylim(0, max([*rates, 1.0]) * 1.25)
    return save_lane_figure(fig, path, len(lanes), title=f"Tier split ({document['mode']})", xlabel="tier")


def plot_plan(document: dict[str, Any], path: Path) -> Path:
    plans = document.get("lanes") or [document]
    fig, axes = lane_panels(path, max(len(plans), 1))
    for ax, plan in zip(axes, plans[:MAX_PANELS], strict=False):
        frontier = plan["frontier"]
        ax.plot(
            [100 * c["hit_rate"] for c in frontier],
            [c["cost_per_hour"] for c in frontier],
            "o-",
            markersize=3,
            color=COLORS[1],
            label="frontier",
        )
        best = plan["best"]
        if best is not None:
            ax.plot(
                [100 * best["hit_rate"]], [best["cost_per_hour"]], "*", markersize=12, color=COLORS[6], label="best"
            )
        ax.set_ylabel("cost per hour")
        ax.set_title(f"lane {plan.get('lane', '')}", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return save_lane_figure(fig, path, len(plans), title="Tier plan: cost against hit rate", xlabel="hit rate (%)")
