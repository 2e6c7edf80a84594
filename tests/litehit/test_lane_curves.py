"""The replay's summary curves are accumulated from the lanes' facts as the replay writes them
(litehit.curve.LaneCurves): they must be exactly the curves exact_curves reads back from the
facts file, on generated configs (several instances, TTL lanes, re-blocking, prefix hash, fanout,
empty requests, equal timestamps), over one chunk or many, and for the extended facts format; a
config with a hybrid instance gets none (its summary reads the file)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers import config, hybrid_instance, instance, request, write_rows
from profile_oracle import write_config, write_jsonl
from test_profile_oracle import SETUPS, standard_trace

from litehit.cli import main
from litehit.curve import LaneCurves, exact_curves
from litehit.jobs.replay import run_replay
from litehit.spec import parse_replay_spec

TARGETS = (0.25, 0.5, 0.9, 0.99, 1.0)


def _same_curves(facts: Path, made: object) -> None:
    got = [c.as_dict() for c in made.curves(TARGETS)]  # type: ignore[attr-defined]
    want = [c.as_dict() for c in exact_curves(facts, TARGETS)]
    assert [c["instance_id"] for c in got] == [c["instance_id"] for c in want]
    assert got == want


@pytest.mark.parametrize(("seed", "fanout", "chunk_bytes", "extended"), [
    (1, False, None, False),
    (2, True, None, False),
    (3, False, 97, False),
    (4, True, 250, True),
])  # fmt: skip
def test_the_replays_curves_are_its_facts_files(
    seed: int, fanout: bool, chunk_bytes: int | None, extended: bool, tmp_path: Path
) -> None:
    rows = standard_trace(random.Random(seed), [s.instance_id for s in SETUPS], 400)
    trace = write_jsonl(tmp_path / "trace.jsonl", rows)
    path = write_config(tmp_path / "config.json", trace, 4, SETUPS, fanout=fanout)
    raw = json.loads(path.read_text())
    if extended:
        raw["facts_format"] = "extended"
    Path(raw["output_result_path"]).mkdir()
    result = run_replay(parse_replay_spec(raw), chunk_bytes=chunk_bytes)
    assert result.curves is not None
    _same_curves(result.facts_path, result.curves)


def test_an_instance_without_requests_has_no_curve(tmp_path: Path) -> None:
    trace = write_rows(tmp_path / "t.jsonl", [request("a", 1, [1, 2], 8), request("b", 2, [1, 2, 3], 12)])
    (tmp_path / "out").mkdir()
    spec = parse_replay_spec(config(trace, tmp_path / "out", instances=[instance("i1"), instance("i2")]))
    result = run_replay(spec)
    assert result.curves is not None
    got = result.curves.curves(TARGETS)
    assert [c.instance_id for c in got] == ["i1"]
    assert [c.as_dict() for c in got] == [c.as_dict() for c in exact_curves(result.facts_path, TARGETS)]


def test_too_many_segments_are_not_kept_and_the_summary_reads_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [request(f"r{i}", i + 1, [1, 2, 3 + i % 7, 40 + i % 3], 16) for i in range(60)]
    trace = write_rows(tmp_path / "t.jsonl", rows)
    (tmp_path / "out").mkdir()
    raw = config(trace, tmp_path / "out", instances=[instance("i1")])
    monkeypatch.setattr(LaneCurves, "MAX_SEGMENTS", 5)
    result = run_replay(parse_replay_spec(raw))
    assert result.curves is not None and not result.curves.kept
    with pytest.raises(ValueError, match="read its facts file"):
        result.curves.curves()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["replay", str(path), "-o", str(tmp_path / "cli"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (want,) = exact_curves(out["facts_path"])
    assert out["lanes"][0]["plateau"]["hit_tokens"] == want.plateau.hit_tokens > 0


def test_a_hybrid_config_summarizes_its_facts_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_rows(tmp_path / "t.jsonl", [request("a", 1, [1, 2, 3, 4], 16), request("b", 2, [1, 2, 3, 4], 16)])
    (tmp_path / "out").mkdir()
    raw = config(trace, tmp_path / "out", instances=[hybrid_instance("i1", linear_step=8)])
    result = run_replay(parse_replay_spec(raw))
    assert result.curves is None
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["replay", str(path), "-o", str(tmp_path / "cli"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lanes = out["lanes"]
    (want,) = exact_curves(out["facts_path"])
    assert [lane["plateau"]["hit_tokens"] for lane in lanes] == [want.plateau.hit_tokens]
