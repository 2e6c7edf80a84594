"""``litehit policies``: the LRU column against the facts query, every policy against the naive
simulator (tests/policy_oracle.py) through the whole CLI pipeline, the JSON shape, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from policy_oracle import simulate

from litehit.capacity import capacity_blocks, parse_capacities
from litehit.cli import main
from litehit.query import query_facts

CAPS = ["0.5", "2", "8", "32"]


def run_policies(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["policies", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_lru_equals_the_facts_query_and_wa_equals_lru_on_one_category(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(data_dir / "conversation_trace.jsonl")
    assert main(["replay", trace, "--block-sizes", "512,1024", "-o", str(tmp_path / "facts")]) == 0
    query = query_facts(tmp_path / "facts" / "litehit_facts.csv", parse_capacities(CAPS))
    out_json, plot = tmp_path / "policies.json", tmp_path / "policies.png"
    code, out, err = run_policies(
        [
            trace,
            "--block-sizes",
            "512,1024",
            "--capacity-gb",
            *CAPS,
            "--verify-lru",
            "-o",
            str(out_json),
            "--plot",
            str(plot),
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out_json.read_text())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [lane["lane"] for lane in result["lanes"]] == ["b512", "b1024"]
    summaries = {s.instance_id: s for s in query.instances}
    for lane in result["lanes"]:
        summary = summaries[lane["lane"].encode()]
        by = {(r["policy"], r["capacity_gb"]): r for r in lane["results"]}
        assert {p for p, _ in by} == {"lru", "fifo", "lfu", "gdfs", "wa"}
        for slot, gb in enumerate(CAPS):
            lru = by[("lru", float(gb))]
            assert lru["hit_blocks"] == summary.total_hit_blocks[slot]
            assert lru["hit_tokens"] == summary.total_hit_tokens[slot]
            assert lru["input_tokens"] == summary.total_input_tokens
            assert lru["requests"] == summary.requests
            assert lru["capacity_blocks"] == capacity_blocks(float(gb), lane["block_bytes"])
            # mooncake rows are one category: WA's only candidate is the least recent block
            wa = by[("wa", float(gb))]
            assert (wa["hit_blocks"], wa["evictions"]) == (lru["hit_blocks"], lru["evictions"])
        check = lane["lru_check"]
        assert check["comparisons"] == summary.requests * len(CAPS)
        assert check["equal"] == check["comparisons"]
        assert lane["wa"]["life_s"] > 0
    assert result["wa"]["life_derived"] is True
    assert result["wa"]["fit_window_s"] == 3600.0
    assert "lane b512" in out and "lru check:" in out
    job_id = out.rsplit("job: ", 1)[1].split()[0]  # the last job printed: the sweep
    assert main(["jobs", "--show", job_id]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "policy_sweep" and shown["state"] == "succeeded"
    assert len(shown["runs"]) == 2 * 5 * len(CAPS)
    for row in shown["runs"]:
        lane = next(x for x in result["lanes"] if x["lane"] == row["instance_id"])
        match = next(
            r for r in lane["results"] if (r["policy"], r["capacity_gb"]) == (row["policy"], row["capacity_gb"])
        )
        assert row["hit_blocks"] == match["hit_blocks"]
        assert row["slot"] == [float(c) for c in CAPS].index(row["capacity_gb"])


def qwen_trace(path: Path, seed: int) -> list[dict[str, object]]:
    """Chats of 1-5 turns, each turn extending the previous prompt, two request types with
    different reuse gaps, over about two hours of trace time."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    chats = []
    next_id = 1000
    for chat in range(120):
        kind = "text" if chat % 3 else "image"
        start = rng.uniform(0, 6000)
        prompt = [next_id + k for k in range(rng.randint(1, 4))]
        next_id += 10
        gap = 30 if kind == "text" else 400
        for turn in range(1, rng.randint(1, 5) + 1):
            chats.append((start, chat, kind, turn, list(prompt)))
            start += rng.expovariate(1 / gap)
            prompt += [next_id + k for k in range(rng.randint(1, 3))]
            next_id += 10
    chats.sort(key=lambda c: c[0])
    for start, chat, kind, turn, prompt in chats:
        rows.append(
            {
                "chat_id": chat,
                "timestamp": round(start, 3),
                "input_length": 16 * len(prompt) + 3,
                "hash_ids": prompt,
                "type": kind,
                "turn": turn,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.mark.parametrize("seed", [1, 2])
def test_every_policy_matches_the_naive_simulator_through_the_cli(
    tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "qwen.jsonl"
    rows = qwen_trace(trace, seed)
    block_bytes = 16 * 1024
    caps_blocks = [3, 12, 40]
    caps = [str(c * block_bytes / 2**30) for c in caps_blocks]
    out_json = tmp_path / "p.json"
    code, _, err = run_policies(
        [
            str(trace),
            "--block-bytes",
            str(block_bytes),
            "--no-prefix-hash",
            "--capacity-gb",
            *caps,
            "--wa-refit-seconds",
            "120",
            "--wa-fit-window-seconds",
            "900",
            "-o",
            str(out_json),
        ],
        capsys,
    )
    assert code == 0, err
    (lane,) = json.loads(out_json.read_text())["lanes"]
    # the naive side: keys as given (no prefix hash), categories named as the profile issue says
    names: dict[str, int] = {}
    requests = []
    for r in rows:
        turn = int(r["turn"])  # type: ignore[call-overload]
        name = f"{r['type']}-{'1' if turn <= 1 else '2' if turn == 2 else '3+'}"
        cat = names.setdefault(name, len(names))
        ts = int(float(r["timestamp"]) * 1e9)  # type: ignore[arg-type]  # the reader truncates
        requests.append((ts, cat, list(r["hash_ids"])))  # type: ignore[call-overload]
    by = {(r["policy"], r["capacity_blocks"]): r for r in lane["results"]}
    for policy in ["lru", "fifo", "lfu", "gdfs", "wa"]:
        for cap in caps_blocks:
            want = simulate(policy, cap, requests, wa_fit_window_s=900.0, wa_refit_s=120.0)
            got = by[(policy, cap)]
            assert got["hit_blocks"] == sum(want.hits), (policy, cap)
            assert got["hit_tokens"] == 16 * sum(want.hits)
            assert got["evictions"] == len(want.evictions)
    assert lane["wa"]["fits"] > 10


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "lru,mru"], "--policies[1]"),
        (["--policies", "lru,lru"], "listed twice"),
        (["--capacity-gb", "0"], "--capacity-gb[0]"),
        (["--capacity-gb", "nan"], "--capacity-gb[0]"),
        (["--capacity-gb", "1", "--wa-refit-seconds", "-5"], "--wa-refit-seconds"),
        (["--capacity-gb", "1", "--wa-life-seconds", "inf"], "--wa-life-seconds"),
        (["--capacity-gb", "1", "--verify-lru", "--policies", "fifo"], "include lru"),
        (["--capacity-gb", "1", "--ttl-seconds", "60"], "has a TTL of 60 s"),
        (["--capacity-gb", "1", "--plot", "x.pdf"], "--plot"),
    ],
)
def test_bad_input_exits_1_naming_the_flag(
    data_dir: Path, tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(data_dir / "conversation_trace.jsonl"), *extra, "-o", str(tmp_path / "p.json")]
    if "--capacity-gb" not in extra:
        args += ["--capacity-gb", "1"]
    code, _, err = run_policies(args, capsys)
    assert code == 1
    assert message in err
    assert err.startswith("litehit: error:") and err.count("\n") == 1
    assert not (tmp_path / "p.json").exists()


def test_wa_refuses_more_categories_than_it_keeps_lists_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "many.jsonl"
    rows = (
        {
            "type": "get",
            "instance_id": "i",
            "timestamp_ns": i + 1,
            "keys": [i % 97],
            "input_len": 256,
            "category": f"u{i}",
        }
        for i in range(70_000)
    )
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_policies([str(trace), "--capacity-gb", "0.001", "--policies", "lru,fifo"], capsys)
    assert code == 0, err  # categories matter to wa only
    code, _, err = run_policies([str(trace), "--capacity-gb", "0.001", "--policies", "wa"], capsys)
    assert code == 1
    errors = [line for line in err.splitlines() if not line.startswith("policies: ")]  # progress lines aside
    assert len(errors) == 1 and "at most 65,536 request categories" in errors[0]
