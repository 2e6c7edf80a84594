"""The pipeline's helper threads (reading, scanning, planning, rendering the facts) run a few nice
levels below the main thread, which feeds the engine; the main thread and the engine's own threads
keep their priority. Linux only: elsewhere run_as_helper changes nothing."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config, instance, request, write_rows

import litehit.replay.chunks as chunks_module
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.publish import AtomicPublisher
from litehit.replay.ordered_map import HELPER_NICENESS, OneBehind, ordered_map, run_as_helper
from litehit.spec import parse_replay_spec

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")


def _nice() -> int:
    """The calling thread's nice value."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _main_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, os.getpid())


def _in_thread(fn: Any) -> Any:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()))
    t.start()
    t.join()
    return box[0]


def test_a_helper_runs_below_the_main_thread_and_the_main_thread_keeps_its_priority() -> None:
    main = _main_nice()

    def helper() -> int:
        run_as_helper()
        run_as_helper()  # twice: still relative to the main thread, not to itself
        return _nice()

    assert _in_thread(helper) == min(19, main + HELPER_NICENESS)
    assert _main_nice() == main
    assert _in_thread(_nice) == main  # a new thread of the main thread's is not a helper


def test_ordered_map_reads_and_works_in_helper_threads() -> None:
    want = min(19, _main_nice() + HELPER_NICENESS)
    read: list[int] = []

    def items() -> Iterator[int]:
        for i in range(20):
            read.append(_nice())  # the feeder pulls the input
            yield i

    out = list(ordered_map(lambda i: (i, _nice()), items(), workers=2))
    assert [i for i, _ in out] == list(range(20))
    assert {nice for _, nice in out} == {want}
    assert set(read) == {want}


def test_one_behind_is_a_helper_only_when_asked() -> None:
    for helper, want in [(True, min(19, _main_nice() + HELPER_NICENESS)), (False, _main_nice())]:
        seen: list[int] = []
        stage = OneBehind("test", helper=helper)
        stage.submit(lambda out: out.append(_nice()), seen)
        stage.close()
        assert seen == [want]


def test_a_replay_scans_plans_and_writes_in_helpers_and_feeds_the_lanes_in_the_main_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = _main_nice()
    helper = min(19, main + HELPER_NICENESS)
    seen: dict[str, set[int]] = {"scan": set(), "plan": set(), "write": set(), "feed": set()}

    def spy(name: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            seen[name].add(_nice())
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(chunks_module, "scan_chunk", spy("scan", chunks_module.scan_chunk))
    monkeypatch.setattr(chunks_module, "plan_chunk", spy("plan", chunks_module.plan_chunk))
    monkeypatch.setattr(AtomicPublisher, "write", spy("write", AtomicPublisher.write))
    from litehit.jobs.replay import LanePart

    monkeypatch.setattr(LanePart, "feed", spy("feed", LanePart.feed))
    rows = [request(f"r{i}", i + 1, [1, 2, 3 + i % 5], 12) for i in range(200)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir()
    run_replay(parse_replay_spec(config(trace, out, instances=[instance("i1")])), chunk_bytes=300)
    assert (out / FACTS_FILE).exists()
    # the header is written in the main thread before the first chunk; every chunk's rows by the helper
    assert seen == {"scan": {helper}, "plan": {helper}, "write": {main, helper}, "feed": {main}}
    assert _main_nice() == main
