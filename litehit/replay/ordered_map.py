"""An order-preserving, bounded, threaded map: the parallel stage of the replay pipeline.

A feeder thread pulls the input (reading and decompressing the trace) and submits work to a
thread pool; the caller receives results in input order as soon as they are ready, even while
the feeder waits for more input (a pipe, slow storage). The C scanner and lane core release the
GIL, so threads give real parallelism without pickling chunks between processes. At most
``ahead`` items are in flight, so memory stays bounded.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["HELPER_NICENESS", "OneBehind", "ordered_map", "run_as_helper"]

T = TypeVar("T")
R = TypeVar("R")

_DONE = object()

HELPER_NICENESS = 5
"""How many nice levels below the process's main thread the pipeline's helper threads run."""


def run_as_helper() -> None:
    """Lowers the calling thread's priority HELPER_NICENESS nice levels below the process's main
    thread (Linux: each thread has a nice value of its own). A pass over a trace keeps more
    threads busy than there are cores: reading, scanning, planning and rendering help the one
    thread that feeds the engine, the critical path of every chunk. Run as helpers, they get
    the cores that thread leaves, and it waits less for a core. Elsewhere, or if the kernel
    refuses, nothing changes."""
    if sys.platform != "linux":
        return
    try:
        main = os.getpriority(os.PRIO_PROCESS, os.getpid())  # on Linux: the main thread's
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, main + HELPER_NICENESS))
    except OSError:
        pass


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int, ahead: int | None = None
) -> Generator[R, None, None]:
    """Yields fn(item) for each item, in input order, with up to ``ahead`` items in flight.
    An exception raised by the input or by fn surfaces at its position in the order. Close the
    generator (or exhaust it) to stop the feeder and the pool."""
    limit = ahead if ahead is not None else max(2, 2 * workers)
    slots: queue.Queue[object] = queue.Queue(maxsize=limit)
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="litehit", initializer=run_as_helper)

    def put(entry: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def feed() -> None:
        run_as_helper()
        try:
            for item in items:
                if stop.is_set() or not put(pool.submit(fn, item)):
                    return
            put(_DONE)
        except BaseException as exc:  # the input failed: report it in order
            put(_Failed(exc))

    feeder = threading.Thread(target=feed, name="litehit-feeder", daemon=True)
    feeder.start()
    try:
        while True:
            entry = slots.get()
            if entry is _DONE:
                return
            if isinstance(entry, _Failed):
                raise entry.exc
            assert isinstance(entry, Future)
            yield entry.result()
    finally:
        stop.set()
        while True:  # unblock the feeder and drop unstarted work
            try:
                entry = slots.get_nowait()
            except queue.Empty:
                break
            if isinstance(entry, Future):
                entry.cancel()
        feeder.join(timeout=5)  # a feeder stuck on a silent pipe is a daemon: let it be
        pool.shutdown(wait=True, cancel_futures=True)


class OneBehind:
    """Runs calls in a thread of its own, one at a time and in the order given, at most one call
    behind the caller (a pipeline stage that follows another by one chunk): ``submit`` first
    waits for the previous call and raises its failure, so nothing runs after a failed call and
    every failure surfaces, in order, at the next ``submit`` or at ``wait``. ``close`` waits for
    the call in flight and ends the thread; the thread starts with the first call, as a helper
    (run_as_helper) if ``helper``."""

    def __init__(self, name: str, *, helper: bool = False) -> None:
        self._name = name
        self._helper = helper
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    def submit(self, fn: Callable[..., None], *args: object) -> None:
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=self._name, initializer=run_as_helper if self._helper else None
            )
        self._pending = self._pool.submit(fn, *args)

    def wait(self) -> None:
        """Waits for the call in flight; raises its failure."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """wait(), then ends the thread (also when the call failed: its failure is raised)."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def drain(self) -> None:
        """Ends the thread after a failed run: waits for the call in flight, its failure dropped
        (the run's error was taken already), and goes on waiting through another Ctrl-C (the
        call may use memory its owner frees next)."""
        while True:
            try:
                self.close()
                return
            except KeyboardInterrupt:
                continue
            except Exception:
                return
