"""An order-preserving, bounded, threaded map: the parallel stage of the replay pipeline.

The C scanner and lane core release the GIL, so threads give real parallelism without pickling
chunks between processes; at most ``ahead`` items are in flight, so memory stays bounded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["ordered_map"]

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int, ahead: int | None = None) -> Generator[R, None, None]:
    """Yields fn(item) for each item, in input order, computing up to ``ahead`` at once."""
    if workers <= 1 and ahead is None:
        ahead = 2  # one chunk scanned while the previous one is replayed
    limit = ahead if ahead is not None else 2 * workers
    pending: deque[Future[R]] = deque()
    with ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="litehit") as pool:
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                # Hand over finished results at once: the next item may take long to arrive.
                while pending and (len(pending) >= limit or pending[0].done()):
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
