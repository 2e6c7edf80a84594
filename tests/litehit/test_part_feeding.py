"""litehit.jobs.local feeds the parts of a run in up to ``workers`` threads (a part always in the
same one), up to AHEAD chunks ahead of the slowest part: a part does not wait for the others at
every chunk, the results are the same, and a failure still comes in input order (an earlier
chunk's part failure before a later chunk's trace error, and before a later chunk's failure of
another part)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import config, instance, request, write_rows

from litehit.errors import ReplayError
from litehit.jobs import local
from litehit.jobs.replay import FACTS_FILE, run_replay
from litehit.replay.lanes import LaneRunner
from litehit.spec import parse_replay_spec


def _trace(tmp_path: Path, rows: int = 60, bad_line: bool = False) -> tuple[Path, Path]:
    trace = write_rows(tmp_path / "t.jsonl", [request(f"r{i}", i + 1, [1, 2, 3 + i % 7], 12) for i in range(rows)])
    if bad_line:
        trace.write_text(trace.read_text() + "{not json\n")
    out = tmp_path / "out"
    out.mkdir()
    return trace, out


def _two_lanes(trace: Path, out: Path, workers: int = 2) -> Any:
    return parse_replay_spec(
        config(
            trace,
            out,
            instances=[instance("fast", 4), instance("slow", 8)],
            fanout_all_instances=True,
            pipeline_worker_count=workers,
        )
    )


class _Recorder:
    """Wraps LaneRunner.run: which chunk each lane (by block size) is fed, and when."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, slow_s: float = 0.0, fail_at: tuple[int, int] | None = None):
        self.lock = threading.Lock()
        self.fed: dict[int, int] = {4: 0, 8: 0}  # chunks fed so far, by block size
        self.lead = 0  # the fast lane's largest lead over the slow one (chunks started)
        self.threads: dict[int, set[int]] = {4: set(), 8: set()}  # the threads that fed each lane
        run = LaneRunner.run

        def wrapped(runner: LaneRunner, work: Any) -> Any:
            size = runner.spec.block_size
            with self.lock:
                self.threads[size].add(threading.get_ident())
                index = self.fed[size]
                self.fed[size] += 1
                self.lead = max(self.lead, self.fed[4] - self.fed[8])
            if fail_at is not None and (size, index) == fail_at:
                time.sleep(0.2)  # the other lane and the reader go on meanwhile
                raise MemoryError(f"lane of {size}-token blocks failed at chunk {index}")
            if size == 8:
                time.sleep(slow_s)
            return run(runner, work)

        monkeypatch.setattr(LaneRunner, "run", wrapped)


def test_a_fast_part_goes_ahead_of_a_slow_one_and_the_facts_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, out = _trace(tmp_path)
    run_replay(_two_lanes(trace, out), chunk_bytes=600)
    want = (out / FACTS_FILE).read_bytes()
    (out / FACTS_FILE).unlink()
    seen = _Recorder(monkeypatch, slow_s=0.02)
    run_replay(_two_lanes(trace, out), chunk_bytes=600)
    assert (out / FACTS_FILE).read_bytes() == want
    assert seen.fed[4] == seen.fed[8] > local.AHEAD + 2  # every chunk, to each lane
    assert 1 < seen.lead <= local.AHEAD + 1  # ahead, but never by more than AHEAD chunks in flight
    assert len(seen.threads[4]) == len(seen.threads[8]) == 1 and seen.threads[4] != seen.threads[8]


def test_one_worker_feeds_every_part_in_one_thread_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, out = _trace(tmp_path)
    run_replay(_two_lanes(trace, out, workers=1), chunk_bytes=600)
    want = (out / FACTS_FILE).read_bytes()
    (out / FACTS_FILE).unlink()
    seen = _Recorder(monkeypatch, slow_s=0.005)
    run_replay(_two_lanes(trace, out, workers=1), chunk_bytes=600)
    assert (out / FACTS_FILE).read_bytes() == want
    assert seen.threads[4] == seen.threads[8] and len(seen.threads[4]) == 1  # --workers bounds the threads
    assert seen.lead <= 1  # one thread: each chunk to both lanes before the next


def test_an_earlier_chunks_part_failure_comes_before_a_later_chunks_bad_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, out = _trace(tmp_path, rows=40, bad_line=True)
    _Recorder(monkeypatch, fail_at=(8, 1))
    with pytest.raises(MemoryError, match="8-token blocks failed at chunk 1"):
        run_replay(_two_lanes(trace, out), chunk_bytes=1200)
    assert list(out.iterdir()) == []


def test_the_bad_line_is_the_error_when_no_part_failed_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, out = _trace(tmp_path, rows=40, bad_line=True)
    seen = _Recorder(monkeypatch, slow_s=0.02)
    with pytest.raises(ReplayError, match=r"t\.jsonl:41"):
        run_replay(_two_lanes(trace, out), chunk_bytes=1200)
    assert seen.fed[4] == seen.fed[8] > 0  # the chunks before it were fed to both lanes
    assert list(out.iterdir()) == []


def test_the_earlier_chunks_failure_wins_between_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow lane fails at chunk 1 after the fast lane, gone ahead, failed at chunk 2."""
    trace, out = _trace(tmp_path)
    run = LaneRunner.run

    def wrapped(runner: LaneRunner, work: Any) -> Any:
        wrapped.calls[runner.spec.block_size] += 1  # type: ignore[attr-defined]
        index = wrapped.calls[runner.spec.block_size] - 1  # type: ignore[attr-defined]
        if runner.spec.block_size == 8 and index == 1:
            time.sleep(0.3)
            raise MemoryError("slow lane, chunk 1")
        if runner.spec.block_size == 4 and index == 2:
            raise MemoryError("fast lane, chunk 2")
        return run(runner, work)

    wrapped.calls = {4: 0, 8: 0}  # type: ignore[attr-defined]
    monkeypatch.setattr(LaneRunner, "run", wrapped)
    with pytest.raises(MemoryError, match="slow lane, chunk 1"):
        run_replay(_two_lanes(trace, out), chunk_bytes=600)
    assert list(out.iterdir()) == []


def test_a_part_that_failed_is_not_fed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow lane fails at chunk 1 while chunks 2 and 3 are already queued for it: they are not
    fed to it (a profile's recorder, a chunk behind its lane, must see nothing after a failure)."""
    trace, out = _trace(tmp_path)
    run = LaneRunner.run
    fed: dict[int, list[int]] = {4: [], 8: []}

    def wrapped(runner: LaneRunner, work: Any) -> Any:
        size = runner.spec.block_size
        fed[size].append(len(fed[size]))
        if size == 8 and len(fed[8]) == 2:
            raise MemoryError("slow lane, chunk 1")
        if size == 4:
            time.sleep(0.05)  # the main thread waits for this lane while the other's queue holds chunks
        return run(runner, work)

    monkeypatch.setattr(LaneRunner, "run", wrapped)
    with pytest.raises(MemoryError, match="slow lane, chunk 1"):
        run_replay(_two_lanes(trace, out), chunk_bytes=600)
    assert fed[8] == [0, 1]  # nothing after its failure
    assert list(out.iterdir()) == []
