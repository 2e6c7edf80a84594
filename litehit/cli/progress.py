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
    """Callable given to run_replay. On a TTY it redraws one line (rows, blocks/s, ETA); otherwise
    it logs a line each time another tenth of the input is read or ``interval`` seconds have passed
    since the last line, whichever comes first, and ``finish`` logs a final line."""

    def __init__(
        self, stream: TextIO | None = None, *, interval: float = 30.0, tty: bool | None = None, label: str = "replay"
    ) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if not self.tty else 0.1
        self._last = time.monotonic()
        self._next_tenth = 1
        self._latest: Progress | None = None
        self._drawn = False

    def __call__(self, p: Progress) -> None:
        self._latest = p
        now = time.monotonic()
        frac = min(p.bytes_read / p.bytes_total, 1.0) if p.bytes_total else 0.0
        if self.tty:
            if now - self._last < self.interval:
                return
        elif now - self._last < self.interval and frac * 10 < self._next_tenth:
            return
        self._last = now
        self._next_tenth = int(frac * 10) + 1
        text = self._text(p, frac)
        if self.tty:
            width = 24
            filled = int(frac * width)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\033[K")
            self._drawn = True
        else:
            self.stream.write(f"{self.label}: {text}\n")
        self.stream.flush()

    @staticmethod
    def _text(p: Progress, frac: float) -> str:
        rate = p.blocks / p.elapsed_s if p.elapsed_s > 0 else 0.0
        eta = (p.elapsed_s / frac - p.elapsed_s) if frac > 0 else 0.0
        text = f"{p.lines:,} rows  {p.blocks:,} blocks  {rate / 1e6:.2f} M blocks/s"
        if p.bytes_total:
            text += f"  {frac:6.1%}  ETA {_fmt_duration(eta)}"
        return text

    def finish(self, outcome: str = "end") -> None:
        """Clears the TTY line; off a terminal, logs the last state once ("done", "stopped", ...)."""
        if self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False
        if not self.tty and self._latest is not None:
            p = self._latest
            rate = p.blocks / p.elapsed_s if p.elapsed_s > 0 else 0.0
            self.stream.write(
                f"{self.label}: {outcome}: {p.lines:,} rows  {p.blocks:,} blocks in "
                f"{_fmt_duration(p.elapsed_s)}  {rate / 1e6:.2f} M blocks/s\n"
            )
            self.stream.flush()
            self._latest = None
