"""Builders shared by the replay, query and service tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

FACTS_HEADER = "trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve"


def instance(
    instance_id: str, block_size: int = 4, *, group: str = "g1", sizes: tuple[int, ...] = (8192, 8192)
) -> dict[str, Any]:
    """An instance like the original runner tests: specs tp0, tp1 of 8192 bytes (block_bytes 16384)."""
    names = [f"tp{i}" for i in range(len(sizes))]
    return {
        "instance_group_name": group,
        "instance_id": instance_id,
        "block_size": block_size,
        "linear_step": 0,
        "location_spec_infos": [{"name": n, "size": s} for n, s in zip(names, sizes, strict=True)],
        "location_spec_groups": [{"name": "full", "spec_names": names}],
        "optimizer_state_info": {"full_location_spec_group_name": "full", "linear_location_spec_group_name": ""},
    }


def hybrid_instance(
    instance_id: str,
    *,
    linear_step: int = 12,
    linear_sizes: tuple[int, ...] = (2048, 2048),
    linear_names: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """HYBRID_G5.md's MakeHybridInfo: block 4, Full specs 2 x 8192, Linear specs 2 x 2048, step 12."""
    linear_specs = [{"name": f"tp{i}_L1", "size": size} for i, size in enumerate(linear_sizes)]
    names = list(linear_names) if linear_names is not None else [spec["name"] for spec in linear_specs]
    return {
        "instance_group_name": "g1",
        "instance_id": instance_id,
        "block_size": 4,
        "linear_step": linear_step,
        "location_spec_infos": [{"name": "tp0_F0", "size": 8192}, {"name": "tp1_F0", "size": 8192}, *linear_specs],
        "location_spec_groups": [
            {"name": "F0", "spec_names": ["tp0_F0", "tp1_F0"]},
            {"name": "L1", "spec_names": names},
        ],
        "optimizer_state_info": {"full_location_spec_group_name": "F0", "linear_location_spec_group_name": "L1"},
    }


def group(name: str = "g1", ttl_seconds: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "capacity_gb": [1.0], "eviction_policy": "lru", "ttl_seconds": ttl_seconds, **extra}


def config(
    trace: Path,
    out: Path,
    *,
    instances: list[dict[str, Any]] | None = None,
    groups: list[dict[str, Any]] | None = None,
    block_size: int = 4,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "trace_file_path": str(trace),
        "output_result_path": str(out),
        "block_size": block_size,
        "instance_groups": groups if groups is not None else [group()],
        "instances": instances if instances is not None else [instance("i1")],
        **extra,
    }


def request(
    trace_id: str, ts: int, keys: list[int], length: int, inst: str = "i1", kind: str = "request"
) -> dict[str, Any]:
    return {
        "type": kind,
        "instance_id": inst,
        "trace_id": trace_id,
        "timestamp_ns": ts,
        "keys": keys,
        "input_len": length,
    }


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_facts(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def lane_config(
    trace: Path,
    out: Path,
    *,
    fmt: str | None = None,
    block_size: int = 16,
    lane_block: int = 16,
    instance: str = "i1",
    ttl: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "trace_file_path": str(trace),
        "output_result_path": str(out),
        "block_size": block_size,
        "instance_groups": [{"name": "g1", "ttl_seconds": ttl}],
        "instances": [
            {
                "instance_group_name": "g1",
                "instance_id": instance,
                "block_size": lane_block,
                "location_spec_infos": [{"name": "tp0", "size": 8192}],
                "location_spec_groups": [{"name": "full", "spec_names": ["tp0"]}],
                "optimizer_state_info": {"full_location_spec_group_name": "full"},
            }
        ],
    }
    if fmt:
        c["trace_format"] = fmt
    c.update(extra)
    return c
