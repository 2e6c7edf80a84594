"""Progress reporting for long jobs: a one-line bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from litehit.replay.chunks import Progress

__all__ = ["ProgressReporter"]


def _fmt_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class ProgressReporter:
    """Callable given to run_replay. On a TTY it redraws one line (rows, blocks/s, ETA);
    otherwise it logs a line at most every ``interval`` seconds."""

    def __init__(
        self, stream: TextIO | None = None, *, interval: float = 5.0, tty: bool | None = None, label: str = "replay"
    ) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if not self.tty else 0.1
        self._last = 0.0
        self._drawn = False

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        rate = p.blocks / p.elapsed_s if p.elapsed_s > 0 else 0.0
        frac = min(p.bytes_read / p.bytes_total, 1.0) if p.bytes_total else 0.0
        eta = (p.elapsed_s / frac - p.elapsed_s) if frac > 0 else 0.0
        text = f"{p.lines:,} rows  {p.blocks:,} blocks  {rate / 1e6:.2f} M blocks/s"
        if p.bytes_total:
            text += f"  {frac:6.1%}  ETA {_fmt_duration(eta)}"
        if self.tty:
            width = 24
            filled = int(frac * width)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\033[K")
            self._drawn = True
        else:
            self.stream.write(f"{self.label}: {text}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False
