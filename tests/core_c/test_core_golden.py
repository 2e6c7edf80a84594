"""The Mooncake golden curves, reproduced line for line by feeding the engine directly:
keys = hash_ids[: input_length // 512], timestamp_ns = ms * 1e6 (examples/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import core_c


def load_trace(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    keys: list[int] = []
    offsets, lens, times = [0], [], []
    with path.open() as f:
        for line in f:
            row = json.loads(line)
            keys += row["hash_ids"][: row["input_length"] // 512]
            offsets.append(len(keys))
            lens.append(row["input_length"])
            times.append(row["timestamp"] * 1_000_000)
    return (
        np.array(keys, dtype=np.int64),
        np.array(offsets, dtype=np.int64),
        np.array(lens, dtype=np.int64),
        np.array(times, dtype=np.int64),
    )


@pytest.mark.parametrize(
    ("name", "block_size", "ttl_seconds"),
    [("conversation_b512", 512, 0), ("conversation_b1024", 1024, 0), ("conversation_b512_ttl60", 512, 60)],
)
def test_golden_curves(data_dir: Path, name: str, block_size: int, ttl_seconds: int) -> None:
    keys, offsets, lens, times = load_trace(data_dir / "conversation_trace.jsonl")
    batch = core_c.normalize_batch(keys, offsets, lens, block_size, trace_block_size=512)
    with core_c.Lane(ttl_ns=ttl_seconds * 10**9) as lane:
        facts = lane.process_batch(batch.keys, batch.offsets, times)
        lane.check()
    got = [json.dumps([list(s) for s in facts.curve(i)], separators=(",", ":")) for i in range(len(facts))]
    want = (data_dir / f"{name}.curves").read_text().splitlines()
    assert len(got) == len(want) == 12031
    mismatches = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert mismatches == []
