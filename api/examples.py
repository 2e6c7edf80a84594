"""Request bodies shown in the API docs (/docs, /redoc): one or more per route that takes a JSON
body, each one the API accepts as it stands. They name a trace and a facts file inside the storage
root (TRACE_FILE, FACTS_FILE: copy a trace there, or use ``trace_id`` of an upload instead) and
the online group and instance they register (ONLINE_INSTANCE). tests/test_api_docs.py posts every
one of them."""

from __future__ import annotations

from typing import Any

from fastapi.openapi.models import Example

from litehit.jobs.kinds import Kind

__all__ = [
    "EXAMPLES",
    "FACTS_FILE",
    "ONLINE_GROUP_EXAMPLES",
    "ONLINE_INSTANCE",
    "ONLINE_INSTANCE_EXAMPLES",
    "PLAN_EXAMPLES",
    "PROFILE_EXAMPLES",
    "QUERY_EXAMPLES",
    "REPLAY_EXAMPLES",
    "ROUTES_EXAMPLES",
    "SWEEP_EXAMPLES",
    "TIERS_EXAMPLES",
    "TRACE_FILE",
    "TRACE_QUERY_BATCH_EXAMPLES",
    "TRACE_QUERY_EXAMPLES",
    "WINDOW_EXAMPLES",
    "Examples",
    "examples",
]

TRACE_FILE = "traces/conversation_trace.jsonl"
"""A trace inside the storage root (examples/data/conversation_trace.jsonl, in mooncake format:
512 tokens per block)."""
FACTS_FILE = "facts/litehit_facts.csv"
"""A facts file inside the storage root (as published by a replay)."""
ONLINE_GROUP = "prod"
ONLINE_INSTANCE = "node-7"

Examples = dict[str, Example]


def examples(**bodies: tuple[str, dict[str, Any]]) -> Examples:
    """OpenAPI examples by name: each a (summary, body) pair."""
    return {name: Example(summary=summary, value=body) for name, (summary, body) in bodies.items()}


def _instance(instance_id: str, group: str, block_size: int, kv_bytes_per_block: int) -> dict[str, Any]:
    """An instance of the original config: one location spec, its full group."""
    return {
        "instance_group_name": group,
        "instance_id": instance_id,
        "block_size": block_size,
        "location_spec_infos": [{"name": "kv", "size": kv_bytes_per_block}],
        "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
        "optimizer_state_info": {"full_location_spec_group_name": "full"},
    }


_ONE_LANE = {
    "trace_file_path": TRACE_FILE,
    "block_size": 512,
    "instance_groups": [{"name": "g"}],
    "instances": [_instance("b512", "g", 512, 1 << 20)],
}
_TWO_GROUPS = {
    "trace_file_path": TRACE_FILE,
    "block_size": 512,
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}],
    "instances": [_instance("b512", "g", 512, 1 << 20), _instance("b512-ttl60", "t60", 512, 1 << 20)],
}

REPLAY_EXAMPLES = examples(
    config=("The original offline config: two lanes, one with a 60 s TTL", _TWO_GROUPS),
    shorthand=(
        "The shorthand: one lane per block size x TTL, KV bytes from a model",
        {"trace_file_path": TRACE_FILE, "block_sizes": [512, 1024], "ttl_seconds": [0, 60], "model": "Llama-3.1-8B"},
    ),
    extended=(
        "Extended facts (for miss attribution), the trace's format named",
        {**_ONE_LANE, "trace_format": "mooncake", "facts_format": "extended"},
    ),
)
QUERY_EXAMPLES = examples(
    facts_file=(
        "Capacities over a facts file in the storage root (or give replay_id of a replay)",
        {"facts_path": FACTS_FILE, "capacity_gb": [0.5, 1, 2, "512MiB", "20000blocks", -1], "targets": [0.9, 0.99]},
    ),
)
TIERS_EXAMPLES = examples(
    hbm_dram_ssd=(
        "Llama-3.1-8B on an H100 with its spare HBM, plus DRAM over PCIe 5 and an NVMe SSD",
        {
            "facts_path": FACTS_FILE,
            "tiers": [
                {"name": "hbm", "capacity": "spare"},
                {"name": "dram", "capacity": "512GiB"},
                {"name": "ssd", "capacity": "4TiB"},
            ],
            "prefill": {"model": "Llama-3.1-8B", "gpu": "H100-SXM"},
        },
    ),
    inclusive=(
        "Inclusive (write-through) tiers in blocks, no prefill model",
        {
            "facts_path": FACTS_FILE,
            "mode": "inclusive",
            "tiers": [{"name": "hbm", "capacity": "1000blocks"}, {"name": "dram", "capacity": "inf"}],
        },
    ),
)
PLAN_EXAMPLES = examples(
    hit_rate=(
        "The cheapest DRAM and SSD beside 30 GiB of HBM reaching a 30% hit rate",
        {
            "facts_path": FACTS_FILE,
            "tiers": [
                {"name": "hbm", "capacity": "30GiB"},
                {"name": "dram", "capacity": "0..2TiB", "price_per_gib_hour": 0.004},
                {"name": "ssd", "capacity": "0..16TiB", "price_per_gib_hour": 0.0002},
            ],
            "target": {"hit_rate": 0.3},
        },
    ),
    ttft=(
        "The cheapest tiers keeping the mean prefill estimate under 0.6 s, valued at 2.5 per GPU-hour",
        {
            "facts_path": FACTS_FILE,
            "tiers": [
                {"name": "hbm", "capacity": "spare"},
                {"name": "dram", "capacity": "0..1TiB", "price_per_gib_hour": 0.004},
            ],
            "prefill": {"model": "Llama-3.1-8B", "gpu": "H100-SXM"},
            "target": {"ttft_s": 0.6},
            "gpu_price_per_hour": 2.5,
        },
    ),
)
SWEEP_EXAMPLES = examples(
    all_policies=(
        "Every policy at three capacities, the LRU column checked",
        {
            **_ONE_LANE,
            "sweep": {"policies": ["lru", "fifo", "lfu", "gdfs", "wa"], "capacity_gb": [1, 4, 16], "verify_lru": True},
        },
    ),
    byte_units=(
        "Two policies, capacities with byte units",
        {**_ONE_LANE, "sweep": {"policies": ["lru", "wa"], "capacity_gb": ["512MiB", "2GiB"]}},
    ),
)
WINDOW_EXAMPLES = examples(
    lru=(
        "The eviction window of LRU at 4 GiB, 99% coverage",
        {
            **_ONE_LANE,
            "window": {
                "capacity_gb": 4,
                "policy": "lru",
                "coverage": 0.99,
                "entry_bytes": 24,
                "load_factor": 0.8,
                "bucket_seconds": 10,
            },
        },
    ),
)
ROUTES_EXAMPLES = examples(
    four=(
        "Four replicas under every state-free router, at 1 GiB and 4 GiB per replica and without a limit",
        {**_ONE_LANE, "routes": {"replicas": 4, "capacities": ["1GiB", "4GiB", "inf"]}},
    ),
    prefix=(
        "Eight replicas: round-robin against prefix-hash routing on the first 4 blocks",
        {
            **_ONE_LANE,
            "routes": {
                "replicas": 8,
                "routers": ["round_robin", "prefix_hash"],
                "prefix_blocks": 4,
                "capacities": ["20000blocks"],
            },
        },
    ),
    cache_aware=(
        "Eight replicas: cache-aware (balanced) and least-loaded routing against round-robin at 64 GiB each",
        {
            **_ONE_LANE,
            "routes": {
                "replicas": 8,
                "routers": ["round_robin", "least_loaded", "cache_aware"],
                "capacities": ["64GiB"],
                "load_window_s": 10,
                "balance_threshold": 0.1,
            },
        },
    ),
)
PROFILE_EXAMPLES = examples(
    config=("A workload profile of two lanes, one with a 60 s TTL", _TWO_GROUPS),
    shorthand=("The shorthand: one lane per block size", {"trace_file_path": TRACE_FILE, "block_sizes": [512, 1024]}),
)
EXAMPLES: dict[Kind, Examples] = {
    Kind.REPLAY: REPLAY_EXAMPLES,
    Kind.QUERY: QUERY_EXAMPLES,
    Kind.TIERS: TIERS_EXAMPLES,
    Kind.PLAN: PLAN_EXAMPLES,
    Kind.POLICY_SWEEP: SWEEP_EXAMPLES,
    Kind.WINDOW: WINDOW_EXAMPLES,
    Kind.PROFILE: PROFILE_EXAMPLES,
    Kind.ROUTES: ROUTES_EXAMPLES,
}
"""The request bodies of every job kind's POST (a kind without an entry shows its schema only)."""
ONLINE_GROUP_EXAMPLES = examples(
    ttl=(
        "Three capacity slots, a 300 s TTL, the infinite cache reported too",
        {"name": ONLINE_GROUP, "capacity_gb": [16, 64, 256], "ttl_seconds": 300, "enable_theoretical_max_cache": True},
    ),
)
ONLINE_INSTANCE_EXAMPLES = examples(
    instance=(
        "An instance of the group: 16 tokens per block, 64 KiB per block",
        _instance(ONLINE_INSTANCE, ONLINE_GROUP, 16, 65536),
    ),
    hybrid=(
        "A hybrid instance (Qwen3-Next-80B-A3B in bf16): 384 KiB of full-attention KV per 16-token block, a "
        "37.7 MiB linear-attention state saved every 256 tokens; its slots are total bytes",
        {
            **_instance("qwen-next-1", ONLINE_GROUP, 16, 393216),
            "linear_step": 256,
            "location_spec_infos": [{"name": "kv", "size": 393216}, {"name": "state", "size": 39518208}],
            "location_spec_groups": [
                {"name": "full", "spec_names": ["kv"]},
                {"name": "linear", "spec_names": ["state"]},
            ],
            "optimizer_state_info": {
                "full_location_spec_group_name": "full",
                "linear_location_spec_group_name": "linear",
            },
        },
    ),
)
TRACE_QUERY_EXAMPLES = examples(
    request=("Three full blocks of a 50-token request", {"block_keys": [11, 22, 33], "input_token_len": 50}),
)
TRACE_QUERY_BATCH_EXAMPLES = examples(
    two=(
        "Two requests, applied in order (block_size tokens per key when input_token_len is missing)",
        {"requests": [{"block_keys": [11, 22]}, {"block_keys": [11, 22, 44]}]},
    ),
)
