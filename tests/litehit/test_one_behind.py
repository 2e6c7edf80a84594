"""OneBehind, the pipeline stage that follows its caller by one call (the profile's recorder, the
facts writer): calls run in order, one at a time; a failure surfaces at the next submit or wait
and nothing runs after it; close ends the thread. And the facts writer on top of it: a write that
fails is the replay's error and nothing is published."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import config, instance, request, write_rows

from litehit.errors import PublishError, ReplayError
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.publish import AtomicPublisher
from litehit.replay.ordered_map import OneBehind
from litehit.spec import parse_replay_spec


def test_calls_run_in_order_one_at_a_time() -> None:
    seen: list[int] = []
    running = []

    def call(i: int) -> None:
        running.append(i)
        assert len(running) == 1  # never two at once
        time.sleep(0.002 * (i % 3))
        seen.append(i)
        running.pop()

    stage = OneBehind("test")
    for i in range(40):
        stage.submit(call, i)
        assert len(seen) >= i  # at most one call behind the caller
    stage.close()
    assert seen == list(range(40))


def test_a_failure_surfaces_at_the_next_submit_and_nothing_runs_after() -> None:
    seen: list[int] = []

    def call(i: int) -> None:
        if i == 2:
            raise ValueError("call 2 failed")
        seen.append(i)

    stage = OneBehind("test")
    before = threading.active_count()
    stage.submit(call, 0)
    stage.submit(call, 1)
    stage.submit(call, 2)
    with pytest.raises(ValueError, match="call 2 failed"):
        stage.submit(call, 3)
    stage.close()  # the failure was taken: closing ends the thread
    assert seen == [0, 1]
    assert threading.active_count() <= before + 0


def test_close_raises_the_last_calls_failure() -> None:
    stage = OneBehind("test")
    stage.submit(lambda: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        stage.close()
    stage.close()  # closing again does nothing


def test_a_failed_facts_write_fails_the_replay_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [request(f"r{i}", i + 1, [1, 2, 3 + i % 5], 12) for i in range(200)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    out = tmp_path / "out"
    out.mkdir()
    spec = parse_replay_spec(config(trace, out, instances=[instance("i1")]))
    written = AtomicPublisher.write
    calls = []

    def write(self: AtomicPublisher, data: bytes) -> None:
        calls.append(len(data))
        if len(calls) == 4:  # the header, then chunk rows: the third chunk's write fails
            raise PublishError(f"cannot write {self.tmp_path}: No space left on device")
        written(self, data)

    monkeypatch.setattr(AtomicPublisher, "write", write)
    before = threading.active_count()
    with pytest.raises(ReplayError, match="No space left on device"):
        run_replay(spec, chunk_bytes=300)
    assert not (out / FACTS_FILE).exists()
    assert list(out.iterdir()) == []  # no temporary file left either
    assert threading.active_count() == before
