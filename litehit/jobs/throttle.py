"""A throttle for heartbeats and cancellation checks: true at most once every `every` seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Throttle"]


@dataclass
class Throttle:
    every: float
    last: float = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            return True
        return False
