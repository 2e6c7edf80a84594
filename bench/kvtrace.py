"""Deterministic generator of KV-cache-like block traces for benchmarks.

Requests of 20..200 blocks. Most continue an earlier conversation (its whole prefix, then new
blocks) or share a prefix of a popular document (Zipf popularity), then add fresh blocks; a few
start from nothing. Keys are prefix-dependent by construction (a fresh block gets a new id), as
in Mooncake traces. The same seed always gives the same trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Trace:
    keys: np.ndarray  # int64, all requests concatenated
    offsets: np.ndarray  # int64, n_requests + 1
    timestamps_ms: np.ndarray  # int64, non-decreasing

    @property
    def requests(self) -> int:
        return len(self.offsets) - 1


def generate(target_accesses: int, seed: int = 20261129, fresh_mean: int = 4) -> Trace:
    rng = np.random.default_rng(seed)
    keys = np.empty(target_accesses + 256, dtype=np.int64)
    offsets = [0]
    next_id = 0
    n_docs = 2000
    doc_len = rng.integers(40, 180, size=n_docs)
    docs = []
    for length in doc_len:
        docs.append(np.arange(next_id, next_id + length, dtype=np.int64))
        next_id += int(length)
    doc_weights = 1.0 / np.arange(1, n_docs + 1) ** 1.1
    doc_weights /= doc_weights.sum()
    conversations: list[np.ndarray] = []
    filled = 0
    batch = 4096
    while filled < target_accesses:
        kinds = rng.random(batch)
        picks = rng.random(batch)
        fresh_counts = rng.integers(max(1, fresh_mean - 7), fresh_mean + 8, size=batch)
        doc_picks = rng.choice(n_docs, size=batch, p=doc_weights)
        cut_fracs = rng.random(batch)
        for j in range(batch):
            fresh = int(fresh_counts[j])
            if kinds[j] < 0.55 and conversations:
                # continue a recent conversation (recent ones are likelier)
                back = min(len(conversations), 1 + int(-np.log(1 - picks[j] * 0.999) * 300))
                idx = len(conversations) - back
                prefix = conversations[idx]
            elif kinds[j] < 0.96:
                doc = docs[doc_picks[j]]
                prefix = doc[: max(10, int(len(doc) * cut_fracs[j]))]
                idx = -1
            else:
                prefix = np.empty(0, dtype=np.int64)
                idx = -1
            if len(prefix) + fresh > 200:
                prefix = prefix[: max(0, 200 - fresh)]
            length = max(20, len(prefix) + fresh)
            fresh = length - len(prefix)
            request = np.empty(length, dtype=np.int64)
            request[: len(prefix)] = prefix
            request[len(prefix) :] = np.arange(next_id, next_id + fresh, dtype=np.int64)
            next_id += fresh
            keys[filled : filled + length] = request[: len(keys) - filled]
            filled += length
            offsets.append(min(filled, len(keys)))
            if idx >= 0:
                conversations[idx] = request
            else:
                conversations.append(request)
            if len(conversations) > 50000:
                conversations = conversations[-25000:]
            if filled >= target_accesses:
                break
    n = len(offsets) - 1
    # ~3 requests per ms on average, with ties
    timestamps = np.cumsum(rng.integers(0, 2, size=n)).astype(np.int64)
    return Trace(keys[:filled].copy(), np.asarray(offsets, dtype=np.int64), timestamps)


def iter_mooncake_lines(trace: Trace, block_tokens: int = 512, seed: int = 7) -> Iterator[str]:
    """The trace as Mooncake JSONL rows (the tail block id is included, as in real files)."""
    rng = np.random.default_rng(seed)
    tails = rng.integers(0, block_tokens, size=trace.requests)
    extra_id = int(trace.keys.max()) + 1 if len(trace.keys) else 0
    for i in range(trace.requests):
        ids = trace.keys[trace.offsets[i] : trace.offsets[i + 1]].tolist()
        length = len(ids) * block_tokens + int(tails[i])
        if tails[i]:
            ids.append(extra_id)
            extra_id += 1
        yield (
            f'{{"timestamp": {int(trace.timestamps_ms[i])}, "input_length": {length}, '
            f'"output_length": 1, "hash_ids": [{", ".join(map(str, ids))}]}}\n'
        )
