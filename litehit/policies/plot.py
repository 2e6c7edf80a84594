"""The sweep's picture: hit ratio over capacity, one line per policy, one panel per lane (PNG or
SVG by the file's suffix)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator, PercentFormatter

from litehit.plots import binary_capacity_axis, save_figure
from litehit.policies.result import PolicySweepResult

__all__ = ["plot_sweep"]

MAX_PANELS = 8
STYLE = {
    "lru": ("#1565c0", "o"),
    "fifo": ("#9e9e9e", "s"),
    "lfu": ("#8e24aa", "^"),
    "gdfs": ("#f9a825", "D"),
    "wa": ("#2e7d32", "*"),
}


def plot_sweep(result: PolicySweepResult, path: Path) -> Path:
    """Draws the sweep to path (.png or .svg), published atomically; returns the path."""
    if path.suffix not in {".png", ".svg"}:
        raise ValueError(f"{path}: a plot file ends in .png or .svg")
    lanes = result.lanes[:MAX_PANELS]
    fig, axes = plt.subplots(len(lanes), 1, figsize=(8, 3.6 * len(lanes)), squeeze=False)
    for ax, lane in zip(axes[:, 0], lanes, strict=True):
        policies = list(dict.fromkeys(r.policy for r in lane.results))
        for policy in policies:
            rows = sorted((r for r in lane.results if r.policy == policy), key=lambda r: r.capacity_gb)
            color, marker = STYLE.get(policy, ("#000000", "."))
            ax.plot(
                [r.capacity_gb for r in rows],
                [r.hit_ratio for r in rows],
                color=color,
                marker=marker,
                label=policy,
                linewidth=1.6 if policy in {"lru", "wa"} else 1.0,
                linestyle="--" if policy == "wa" else "-",  # WA often equals LRU: keep both visible
            )
        binary_capacity_axis(ax)
        ax.set_xticks(sorted({r.capacity_gb for r in lane.results}))  # the capacities asked
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(bottom=0)
        ax.set_ylabel("hit ratio (tokens)")
        ax.set_title(f"lane {lane.lane} (block {lane.block_size} tokens, {lane.block_bytes:,} B)", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8, ncol=len(policies))
    axes[-1, 0].set_xlabel("cache capacity")
    if len(result.lanes) > MAX_PANELS:
        fig.text(0.01, 0.005, f"first {MAX_PANELS} of {len(result.lanes)} lanes", fontsize=8)
    fig.suptitle("Hit ratio by eviction policy at fixed capacities", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path.with_name(path.stem), [path.suffix.lstrip(".")])[0]
