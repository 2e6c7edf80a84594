"""A figure of one panel per lane, as the what-if reports draw them (``litehit policies``,
``litehit window``): at most MAX_PANELS panels stacked, PNG or SVG by the file's suffix,
published atomically."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not with the CLI
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MAX_PANELS", "PLOT_SUFFIXES", "check_plot_path", "lane_panels", "save_lane_figure"]

MAX_PANELS = 8
PLOT_SUFFIXES = frozenset({".png", ".svg"})


def check_plot_path(path: Path) -> None:
    """ValueError unless path ends in .png or .svg."""
    if path.suffix not in PLOT_SUFFIXES:
        raise ValueError(f"{path}: a plot file ends in .png or .svg")


def lane_panels(path: Path, lanes: int) -> tuple[Figure, list[Axes]]:
    """A figure for path with one panel per lane, for the first MAX_PANELS of `lanes` (>= 1)."""
    from matplotlib.figure import Figure  # no pyplot: nothing global, no GUI backend

    check_plot_path(path)
    shown = min(lanes, MAX_PANELS)
    fig = Figure(figsize=(8, 3.6 * shown))
    axes = fig.subplots(shown, 1, squeeze=False)
    return fig, list(axes[:, 0])


def save_lane_figure(fig: Figure, path: Path, lanes: int, *, title: str, xlabel: str) -> Path:
    """Labels the bottom panel, notes the lanes left out, titles and publishes the figure."""
    from litehit.plots import save_figure

    fig.axes[-1].set_xlabel(xlabel)
    if lanes > MAX_PANELS:
        fig.text(0.01, 0.005, f"first {MAX_PANELS} of {lanes} lanes", fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path.with_name(path.stem), [path.suffix.lstrip(".")])[0]
