"""Lane setups: lanes with the same block size, block bytes and TTL ask the same question of the
trace, so only their hits add up to a meaningful total. A query over lanes of several setups
(a fanout over block sizes or TTLs) has one total per setup and none across them.

The facts file holds block sizes and block bytes but no TTL: setups come from the replay's
config. Without it (a facts file alone) they are unknown and the query keeps the original's
single total over every instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from litehit.errors import ConfigError
from litehit.query import QueryResult, Summary
from litehit.spec import parse_replay_spec

__all__ = ["Setup", "SetupTotal", "replay_setups", "setup_totals"]


@dataclass(frozen=True, slots=True, order=True)
class Setup:
    block_size: int  # tokens per block of the lanes
    block_bytes: int  # KV bytes of one block
    ttl_seconds: int  # 0: no TTL

    @property
    def key(self) -> str:
        """The setup's name in SQL summary rows and job statistics."""
        return f"block_size={self.block_size},block_bytes={self.block_bytes},ttl_seconds={self.ttl_seconds}"

    def as_dict(self) -> dict[str, int]:
        return {"block_size": self.block_size, "block_bytes": self.block_bytes, "ttl_seconds": self.ttl_seconds}


@dataclass(frozen=True)
class SetupTotal:
    setup: Setup
    instances: list[str]  # the lanes summed, byte-wise sorted
    summary: Summary  # instance_id None: a total


def replay_setups(config: Mapping[str, Any]) -> dict[str, Setup]:
    """instance id -> setup, from a replay's config as its job stores it; {} when it does not
    parse (a config from an older version, say)."""
    try:
        spec = parse_replay_spec({**config, "trace_file_path": "<trace>", "output_result_path": "<out>"})
    except (ConfigError, TypeError, ValueError):
        return {}
    return {
        i.instance_id: Setup(i.block_size, spec.block_bytes_of(i), spec.group_of(i).ttl_seconds) for i in spec.instances
    }


def setup_totals(result: QueryResult, setups: Mapping[str, Setup]) -> list[SetupTotal]:
    """One total per setup over the result's instances, in setup order; [] when the setup of
    some instance is unknown."""
    names = [(s.instance_id or b"").decode("utf-8", "replace") for s in result.instances]
    if not names or any(name not in setups for name in names):
        return []
    members: dict[Setup, list[Summary]] = {}
    for name, summary in zip(names, result.instances, strict=True):
        members.setdefault(setups[name], []).append(summary)
    return [
        SetupTotal(setup, [(s.instance_id or b"").decode("utf-8", "replace") for s in group], _sum(group, result))
        for setup, group in sorted(members.items())
    ]


def _sum(summaries: Sequence[Summary], result: QueryResult) -> Summary:
    n = len(result.slots)
    return Summary(
        None,
        sum(s.requests for s in summaries),
        sum(s.total_input_tokens for s in summaries),
        [sum(s.total_hit_blocks[i] for s in summaries) for i in range(n)],
        [sum(s.total_hit_tokens[i] for s in summaries) for i in range(n)],
    )
