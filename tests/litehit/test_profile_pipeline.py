"""The profile's recorder follows the lane core one chunk behind, in a thread of its own
(litehit.profile.runs): over many small chunks the profile is still the naive computation's, a
recording that fails surfaces as the run's error with nothing published, and no thread is left."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from profile_oracle import naive_lane_profile, standard_lane_rows, write_config, write_jsonl
from test_profile_oracle import NS, SETUPS, assert_lanes, standard_trace

from litehit.jobs.local import run_local
from litehit.jobs.profile import KIND
from litehit.profile.runs import ProfileRun
from litehit.spec import ReplaySpec, parse_replay_spec


def _case(tmp_path: Path, seed: int) -> tuple[ReplaySpec, list[dict[str, Any]]]:
    rows = standard_trace(random.Random(seed), [s.instance_id for s in SETUPS], 300)
    trace = write_jsonl(tmp_path / "trace.jsonl", rows)
    config = write_config(tmp_path / "config.json", trace, 4, SETUPS, fanout=True)
    want = [
        naive_lane_profile(
            s.instance_id,
            standard_lane_rows(rows, s, 4, fanout=True),
            block_size=s.block_size,
            block_bytes=s.block_bytes,
            ttl_ns=s.ttl_seconds * NS,
        )
        for s in SETUPS
    ]
    return parse_replay_spec(json.loads(config.read_text())), want


def _profile(runtime: ReplaySpec, chunk_bytes: int) -> list[dict[str, Any]]:
    spec = KIND.spec_of(runtime.model_dump(mode="json"), None)
    run = run_local(KIND, spec, runtime, chunk_bytes=chunk_bytes)
    lanes: list[dict[str, Any]] = json.loads(run.merged.value.json_bytes())["lanes"]
    return lanes


@pytest.mark.parametrize("chunk_bytes", [64, 500, 1 << 20])
def test_many_chunks_give_the_naive_profile(chunk_bytes: int, tmp_path: Path) -> None:
    runtime, want = _case(tmp_path, 7)
    before = threading.active_count()
    assert_lanes(_profile(runtime, chunk_bytes), want)
    assert threading.active_count() == before  # the recording threads ended


def test_a_failed_recording_is_the_runs_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, _ = _case(tmp_path, 8)
    recorded = ProfileRun.record
    calls = []

    def record(self: ProfileRun, work: Any, facts: Any) -> None:
        calls.append(len(work.offsets) - 1)
        if len(calls) == 3:
            raise MemoryError("out of memory in the profile recorder")
        recorded(self, work, facts)

    monkeypatch.setattr(ProfileRun, "record", record)
    before = threading.active_count()
    with pytest.raises(MemoryError, match="profile recorder"):
        _profile(runtime, 64)
    assert threading.active_count() == before
