"""OneBehind, the pipeline stage that follows its caller by one call (the profile's recorder, the
facts writer): calls run in order, one at a time; a failure surfaces at the next submit or wait
and nothing runs after it; close ends the thread. And the facts writer on top of it: a write that
fails is the replay's error and nothing is published."""

from __future__ import annotations

import json
import os
import signal
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


def _bad_line_case(tmp_path: Path) -> tuple[Path, Path]:
    """A trace whose 41st line is malformed, far enough to be in a later chunk than the first."""
    rows = [request(f"r{i}", i + 1, [1, 2, 3 + i % 5], 12) for i in range(40)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    trace.write_text(trace.read_text() + "{not json\n")
    out = tmp_path / "out"
    out.mkdir()
    return trace, out


def test_a_failed_write_comes_before_a_later_chunks_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk 1's rows could not be written while chunk 3's line 41 is malformed: the write is
    the earlier failure, so it is the replay's error (input order), whichever surfaced first."""
    trace, out = _bad_line_case(tmp_path)
    spec = parse_replay_spec(config(trace, out, instances=[instance("i1")]))
    written = AtomicPublisher.write
    calls = []

    def write(self: AtomicPublisher, data: bytes) -> None:
        calls.append(1)
        if len(calls) == 2:  # the header, then the first chunk's rows
            time.sleep(0.2)  # the later chunks are read meanwhile
            raise PublishError(f"cannot write {self.tmp_path}: disk full at chunk 1")
        written(self, data)

    monkeypatch.setattr(AtomicPublisher, "write", write)
    with pytest.raises(ReplayError, match="disk full at chunk 1"):
        run_replay(spec, chunk_bytes=1200)
    assert list(out.iterdir()) == []


def test_a_failed_recording_comes_before_a_later_chunks_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from litehit.jobs.local import run_local
    from litehit.jobs.profile import KIND
    from litehit.profile.runs import ProfileRun

    trace, out = _bad_line_case(tmp_path)
    runtime = parse_replay_spec(config(trace, out, instances=[instance("i1")]))
    recorded = ProfileRun.record
    calls = []

    def record(self: ProfileRun, work: object, facts: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.2)
            raise MemoryError("out of memory recording chunk 1")
        recorded(self, work, facts)  # type: ignore[arg-type]

    monkeypatch.setattr(ProfileRun, "record", record)
    with pytest.raises(MemoryError, match="recording chunk 1"):
        run_local(KIND, KIND.spec_of(runtime.model_dump(mode="json"), None), runtime, chunk_bytes=1200)


class _Interrupted(Exception):
    pass


def test_a_stalled_read_does_not_hide_the_runs_error(tmp_path: Path) -> None:
    """A trace from a FIFO whose writer falls silent, and the run interrupted (as by Ctrl-C) while
    it waits for the next chunk: the interruption is the run's error. (The scan stage is closed
    by the thread that reads it; closing it from another thread while that one was still inside
    it, after the feeder's 5 s wait, raised 'generator already executing' instead.)"""
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    spec = parse_replay_spec(config(fifo, out, instances=[instance("i1")], trace_format="standard"))
    lines = "".join(json.dumps(request(f"r{i}", i + 1, [1, 2, 3], 12)) + "\n" for i in range(30))

    def feed() -> None:
        with fifo.open("w") as f:
            f.write(lines)
            f.flush()
            time.sleep(7)  # silent beyond the feeder's 5 s wait

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted("interrupted while the trace was silent")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(_Interrupted):
            run_replay(spec, chunk_bytes=700)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    writer.join()
