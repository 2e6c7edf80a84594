"""The files a trace command writes besides its printed summary: the --plot path, checked before
any work (a bad one is a ConfigError naming the flag), and a result published atomically."""

from __future__ import annotations

from pathlib import Path

from litehit.errors import ConfigError, ConfigIssue
from litehit.lane_plots import PLOT_SUFFIXES
from litehit.publish import publish_bytes

__all__ = ["check_plot_flag", "publish_bytes"]


def check_plot_flag(path: Path | None) -> None:
    if path is not None and path.suffix not in PLOT_SUFFIXES:
        raise ConfigError([ConfigIssue("--plot", str(path), "a plot file ends in .png or .svg")])
