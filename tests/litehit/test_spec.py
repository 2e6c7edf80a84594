"""The replay spec accepts the original config as is, with its defaults and rejections; every
error names the field path and the bad value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, hybrid_instance, instance

from litehit.errors import ConfigError
from litehit.spec import TraceFormat, load_replay_config, parse_replay_spec

EXAMPLE = {  # ORIGINAL_LITEHIT.md §2.5
    "trace_file_path": "/data/trace.jsonl",
    "output_result_path": "/data/out",
    "block_size": 16,
    "fanout_all_instances": True,
    "pipeline_worker_count": 4,
    "instance_groups": [
        {"name": "g1", "capacity_gb": [1.0], "eviction_policy": "lru", "ttl_seconds": 0, "enable_prefix_hash": False}
    ],
    "instances": [
        {
            "instance_group_name": "g1",
            "instance_id": "bs16",
            "block_size": 16,
            "linear_step": 0,
            "location_spec_infos": [{"name": "tp0", "size": 8192}, {"name": "tp1", "size": 8192}],
            "location_spec_groups": [{"name": "full", "spec_names": ["tp0", "tp1"]}],
            "optimizer_state_info": {"full_location_spec_group_name": "full", "linear_location_spec_group_name": ""},
        },
        {
            "instance_group_name": "g1",
            "instance_id": "bs64",
            "block_size": 64,
            "linear_step": 0,
            "location_spec_infos": [{"name": "tp0", "size": 32768}],
            "location_spec_groups": [{"name": "full", "spec_names": ["tp0"]}],
            "optimizer_state_info": {"full_location_spec_group_name": "full"},
        },
    ],
}


def issues(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_replay_spec(data)
    return [(i.path, i.message) for i in info.value.issues]


def base() -> dict[str, Any]:
    return config(Path("/t.jsonl"), Path("/out"))


def test_accepts_the_original_example_config() -> None:
    spec = parse_replay_spec(EXAMPLE)
    assert spec.block_size == 16 and spec.workers == 4 and spec.fanout_all_instances
    assert [i.block_bytes for i in spec.instances] == [16384, 32768]
    assert spec.trace_format is None and spec.facts_format == "standard"


def test_defaults_of_a_minimal_config() -> None:
    spec = parse_replay_spec(
        {
            "trace_file_path": "t",
            "output_result_path": "o",
            "instance_groups": [{"name": "g"}],
            "instances": [{**instance("i", 256, group="g")}],
        }
    )
    assert spec.block_size == 256
    assert spec.override_instance_id == "" and not spec.fanout_all_instances
    g = spec.instance_groups[0]
    assert (g.eviction_policy, g.ttl_seconds, g.shared_group_quota, g.capacity_gb) == ("lru", 0, False, [])
    assert g.prefix_hash_for(TraceFormat.STANDARD) is False
    assert g.prefix_hash_for(TraceFormat.QWEN_BAILIAN) is True  # decision 1: qwen defaults on
    explicit = parse_replay_spec({**spec.model_dump(), "instance_groups": [{"name": "g", "enable_prefix_hash": False}]})
    assert explicit.instance_groups[0].prefix_hash_for(TraceFormat.QWEN_BAILIAN) is False


@pytest.mark.parametrize("workers", [0, -3])
def test_pipeline_worker_count_below_one_is_clamped(workers: int) -> None:
    assert parse_replay_spec({**base(), "pipeline_worker_count": workers}).workers == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("block_size", -1, "integer out of range"),
        ("block_size", "256", "expected an integer"),
        ("block_size", 25.5, "a double must be lossless"),
        ("block_size", True, "expected an integer"),
        ("fanout_all_instances", "yes", "Input should be a valid boolean"),
        ("trace_file_path", 5, "Input should be a valid string"),
        ("trace_format", "csv", "Input should be 'standard'"),
    ],
)
def test_wrong_json_types_fail_with_path_and_value(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_replay_spec({**base(), field: value})
    (issue,) = info.value.issues
    assert issue.path == field and issue.value == value and message in issue.message
    assert f"{field}: " in str(info.value) and repr(value) in str(info.value)


def test_lossless_double_is_accepted() -> None:
    assert parse_replay_spec({**base(), "block_size": 4.0}).block_size == 4


def test_nested_paths_are_named() -> None:
    data = base()
    data["instances"][0]["location_spec_infos"][1]["size"] = "big"
    assert issues(data) == [("instances[0].location_spec_infos[1].size", "expected an integer")]


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"trace_file_path": ""}, "trace_file_path", "lite_hit config: trace_file_path must not be empty"),
        ({"output_result_path": ""}, "output_result_path", "lite_hit config: output_result_path must not be empty"),
        ({"instance_groups": []}, "instance_groups", "lite_hit config: instance_groups must not be empty"),
        ({"instances": []}, "instances", "lite_hit config: instances must not be empty"),
        (
            {"fanout_all_instances": True, "override_instance_id": "i1"},
            "fanout_all_instances",
            "lite_hit config: fanout_all_instances and override_instance_id are mutually exclusive",
        ),
        ({"block_size": 0}, "block_size", "lite_hit config: block_size (trace granularity) must be positive"),
        (
            {"override_instance_id": "x"},
            "override_instance_id",
            "override_instance_id[x] has no matching configured instance",
        ),
        (
            {"instance_groups": [group(), group()]},
            "instance_groups[1].name",
            "CreateInstanceGroup[g1] failed: duplicate group name",
        ),
        (
            {"instance_groups": [group(eviction_policy="fifo")]},
            "instance_groups[0].eviction_policy",
            'eviction_policy must be "lru"',
        ),
        (
            {"instance_groups": [group(shared_group_quota=True)]},
            "instance_groups[0].shared_group_quota",
            "shared_group_quota is not supported",
        ),
        (
            {"instance_groups": [group(capacity_gb=[1.0, -2.0])]},
            "instance_groups[0].capacity_gb[1]",
            "capacity_gb must be finite and not negative",
        ),
        (
            {"instances": [instance("i1"), instance("i1")]},
            "instances[1].instance_id",
            "duplicate instance_id[i1] in config",
        ),
        (
            {"instances": [{**instance("i1"), "linear_step": 2}]},
            "instances[0].linear_step",
            "RegisterInstance[i1] failed: linear_step=2 tokens is not a multiple of block_size=4 for instance[i1]",
        ),
        (
            {"instances": [{**instance("i1"), "linear_step": -4}]},
            "instances[0].linear_step",
            "RegisterInstance[i1] failed: linear_step must not be negative",
        ),
        (
            {"instances": [{**instance("i1"), "linear_step": 8}]},
            "instances[0].optimizer_state_info.linear_location_spec_group_name",
            "RegisterInstance[i1] failed: linear instance[i1] requires a non-empty Mamba spec group",
        ),
        (
            {"instances": [hybrid_instance("i1", linear_step=0)]},
            "instances[0].optimizer_state_info.linear_location_spec_group_name",
            "RegisterInstance[i1] failed: full-attention instance[i1] must not configure a linear/Mamba spec group",
        ),
        (
            {"instances": [hybrid_instance("i1", linear_sizes=())]},
            "instances[0].location_spec_groups[1].spec_names",
            "RegisterInstance[i1] failed: the linear spec group holds no bytes",
        ),
        (
            {"instances": [hybrid_instance("i1", linear_names=("m9",))]},
            "instances[0].optimizer_state_info.linear_location_spec_group_name",
            "RegisterInstance[i1] failed: spec 'm9' is not defined",
        ),
        (
            {"instances": [hybrid_instance("i1")], "facts_format": "extended"},
            "facts_format",
            "instance[i1] is a hybrid lane (linear_step 12): extended facts are Full-only",
        ),
        (
            {"instances": [instance("i1", 0)]},
            "instances[0].block_size",
            "RegisterInstance[i1] failed: block_size must be positive",
        ),
        (
            {"instances": [instance("i1", 6)]},
            "instances[0].block_size",
            "instance[i1] block_size=6 is not a multiple of the trace block_size=4 (re-blocking is coarsening only)",
        ),
        (
            {"instances": [instance("")]},
            "instances[0].instance_id",
            "RegisterInstance[] failed: instance_id must not be empty",
        ),
        (
            {"instances": [instance("i1", group="nope")]},
            "instances[0].instance_group_name",
            "RegisterInstance[i1] failed: no instance group of that name",
        ),
        (
            {"instances": [{**instance("i1"), "location_spec_infos": []}]},
            "instances[0].location_spec_infos",
            "RegisterInstance[i1] failed: location_spec_infos must not be empty",
        ),
        (
            {"instances": [instance("i1", sizes=(8192, 0))]},
            "instances[0].location_spec_infos[1].size",
            "RegisterInstance[i1] failed: spec size must be positive",
        ),
        (
            {"instances": [{**instance("i1"), "optimizer_state_info": {}}]},
            "instances[0].optimizer_state_info.full_location_spec_group_name",
            "RegisterInstance[i1] failed: the full spec group is required",
        ),
        (
            {
                "instances": [
                    {**instance("i1"), "location_spec_groups": [{"name": "full", "spec_names": ["tp0", "tp9"]}]}
                ]
            },
            "instances[0].optimizer_state_info.full_location_spec_group_name",
            "RegisterInstance[i1] failed: spec 'tp9' is not defined",
        ),
        (
            {
                "instances": [
                    {
                        **instance("i1"),
                        "optimizer_state_info": {
                            "full_location_spec_group_name": "full",
                            "linear_location_spec_group_name": "full",
                        },
                    }
                ]
            },
            "instances[0].optimizer_state_info.linear_location_spec_group_name",
            "RegisterInstance[i1] failed: must differ from the full group",
        ),
    ],
)
def test_semantic_rejections_follow_the_original(change: dict[str, Any], path: str, message: str) -> None:
    assert (path, message) in issues({**base(), **change})


def test_issues_come_in_the_original_order() -> None:
    data = {**base(), "block_size": 0, "instances": [{**instance("a"), "linear_step": 1}, instance("a")]}
    paths = [p for p, _ in issues(data)]
    assert paths == [
        "block_size",
        "instances[0].linear_step",
        "instances[0].optimizer_state_info.linear_location_spec_group_name",
        "instances[1].instance_id",
    ]


def test_a_hybrid_instance_is_valid_and_charges_its_groups() -> None:
    from litehit.spec import parse_replay_spec

    spec = parse_replay_spec({**base(), "instances": [hybrid_instance("m1")]})
    (inst,) = spec.instances
    assert (inst.block_bytes, inst.linear_charge_bytes, inst.linear_step_blocks) == (16384, 4096, 3)


def test_unknown_fields_are_kept_and_reported() -> None:
    data = base()
    data["online_only"] = 1
    data["instances"][0]["optimizer_state_info"]["extra"] = "x"
    spec = parse_replay_spec(data)
    assert spec.unknown_fields() == ["online_only", "instances[0].optimizer_state_info.extra"]


def test_load_config_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"block_size": 4,')
    with pytest.raises(ConfigError, match="Failed to parse LiteHit config file: Expecting property name"):
        load_replay_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="the config must be a JSON object"):
        load_replay_config(bad)
    with pytest.raises(ConfigError, match="Failed to parse LiteHit config file"):
        load_replay_config(tmp_path / "missing.json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(EXAMPLE))
    assert load_replay_config(good).instances[1].instance_id == "bs64"


def test_the_trace_format_enum_names_exactly_the_c_format_table() -> None:
    from core_c.scan import TRACE_FORMATS
    from litehit.replay.plan import INSTANCELESS

    assert {f.value for f in TraceFormat} == {f.name for f in TRACE_FORMATS}
    assert {TraceFormat.MOONCAKE, TraceFormat.QWEN_BAILIAN} == INSTANCELESS


def test_names_ids_and_paths_must_not_contain_nul_bytes() -> None:
    data = base()
    data["trace_file_path"] = "/t\x00.jsonl"
    data["instances"][0]["instance_id"] = "i\x001"
    data["instance_groups"][0]["name"] = "g\x00"
    found = issues(data)
    assert ("trace_file_path", "must not contain a NUL byte") in found
    assert ("instance_groups[0].name", "must not contain a NUL byte") in found
    assert ("instances[0].instance_id", "must not contain a NUL byte") in found


@pytest.mark.parametrize(
    ("where", "value", "reported"),
    [
        ("top", float("inf"), float("inf")),
        ("group", {"nested": [1.0, float("nan")]}, "nan"),
        (
            "top",
            [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
            "<nested deeper than 32 levels>",
        ),
    ],
)
def test_unknown_fields_must_be_plain_json(where: str, value: Any, reported: Any) -> None:
    """Jobs store their config as JSON: NaN/Infinity or a field nested deeper than 32 levels in
    an unknown (kept) field is rejected by the field's own path."""
    data = base()
    (data if where == "top" else data["instance_groups"][0])["future"] = value
    with pytest.raises(ConfigError) as info:
        parse_replay_spec(data)
    (issue,) = info.value.issues
    assert issue.path == ("future" if where == "top" else "instance_groups[0].future")
    assert issue.message.startswith("unknown field ")
    assert str(issue.value) == str(reported)
    data = base()
    data["future"] = json.loads("[" * 31 + '{"ok": 1.5}' + "]" * 31)  # 32 levels: plain enough
    assert parse_replay_spec(data).unknown_fields() == ["future"]


def test_a_full_spec_group_without_specs_is_rejected() -> None:
    """Its block_bytes would be 0 (bytes per block from an empty sum)."""
    data = base()
    data["instances"][0]["location_spec_groups"][0]["spec_names"] = []
    assert issues(data) == [
        (
            "instances[0].location_spec_groups[0].spec_names",
            "RegisterInstance[i1] failed: the full spec group names no spec",
        )
    ]


def test_a_config_nested_too_deeply_for_the_json_reader(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"instances": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match="Failed to parse LiteHit config file: nesting too deep"):
        load_replay_config(path)
