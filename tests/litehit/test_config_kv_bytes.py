"""KV bytes per token in the original config form: an instance group's ``model`` (with
``kv_dtype``) or ``kv_bytes_per_token`` give its lanes' block bytes, as the shorthand's --model
and --kv-bytes-per-token do; errors name the field path; configs without them are unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, instance

from litehit.errors import ConfigError
from litehit.kv_models import model_named
from litehit.spec import parse_replay_spec

LITEHIT = str(Path(sys.executable).with_name("litehit"))
LLAMA_8B = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16 bytes = 131072


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LITEHIT, *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False)


def model_config(trace: Path, out: str, **first_group: Any) -> dict[str, Any]:
    """The shorthand's config of --block-sizes 512,1024 --ttl-seconds 0,60, written by hand with
    the KV bytes on the groups and no location specs (but one instance that states agreeing ones)."""
    stated = instance("b1024_ttl60", 1024, group="ttl60", sizes=(LLAMA_8B * 1024,))
    return {
        "trace_file_path": str(trace),
        "output_result_path": out,
        "block_size": 512,
        "trace_format": "mooncake",
        "fanout_all_instances": True,
        "pipeline_worker_count": 2,
        "instance_groups": [
            {"name": "ttl0", **first_group},
            {"name": "ttl60", "ttl_seconds": 60, "kv_bytes_per_token": LLAMA_8B},
        ],
        "instances": [
            {"instance_group_name": "ttl0", "instance_id": "b512", "block_size": 512},
            {"instance_group_name": "ttl0", "instance_id": "b1024", "block_size": 1024},
            {"instance_group_name": "ttl60", "instance_id": "b512_ttl60", "block_size": 512},
            stated,
        ],
    }


def test_a_config_with_a_model_gives_the_facts_and_answers_of_the_shorthand(data_dir: Path, tmp_path: Path) -> None:
    trace = data_dir / "conversation_trace.jsonl"
    (tmp_path / "c.json").write_text(json.dumps(model_config(trace, "cfg", model="llama-3.1-8b")))
    by_config = run("replay", "c.json", cwd=tmp_path)
    assert by_config.returncode == 0, by_config.stderr
    flags = ["--block-sizes", "512,1024", "--ttl-seconds", "0,60", "--model", "Llama-3.1-8B"]
    by_flags = run("replay", str(trace), *flags, "-o", "sh", cwd=tmp_path)
    assert by_flags.returncode == 0, by_flags.stderr
    facts = (tmp_path / "cfg" / "litehit_facts.csv").read_bytes()
    assert facts == (tmp_path / "sh" / "litehit_facts.csv").read_bytes()
    assert b",512,67108864," in facts and b",1024,134217728," in facts  # 128 KiB/token x block size
    # the same summary (all but the paths, timings and job ids), and no default-bytes note
    assert (
        "note: KV bytes" not in by_config.stdout and "note: KV bytes" in run("replay", str(trace), cwd=tmp_path).stdout
    )

    def summary(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith(("lane ", " "))]

    assert summary(by_config.stdout) == summary(by_flags.stdout)
    caps = ["--capacity", "1", "64GiB", "3000blocks", "1Mtokens", "-1"]
    answers = [run("query", f"{d}/litehit_facts.csv", *caps, "-o", f"{d}.jsonl", cwd=tmp_path) for d in ("cfg", "sh")]
    assert [a.returncode for a in answers] == [0, 0]
    assert (tmp_path / "cfg.jsonl").read_bytes() == (tmp_path / "sh.jsonl").read_bytes()


def test_kv_dtype_and_kv_bytes_per_token_set_the_block_bytes(data_dir: Path) -> None:
    base = model_config(data_dir / "conversation_trace.jsonl", "out", model="DeepSeek-V3", kv_dtype="fp8")
    spec = parse_replay_spec(base)
    deepseek = model_named("DeepSeek-V3")
    assert deepseek is not None
    per_token = 61 * (512 + 64) * 1
    assert deepseek.bytes_per_token("fp8") == per_token
    assert [spec.block_bytes_of(i) for i in spec.instances] == [
        per_token * 512,
        per_token * 1024,
        LLAMA_8B * 512,
        LLAMA_8B * 1024,
    ]
    agreeing = model_config(data_dir / "conversation_trace.jsonl", "out", model="Qwen2.5-7B", kv_bytes_per_token=57344)
    assert parse_replay_spec(agreeing).block_bytes_of(parse_replay_spec(agreeing).instances[0]) == 57344 * 512


def _issues(data: dict[str, Any]) -> list[tuple[str, Any, str]]:
    with pytest.raises(ConfigError) as err:
        parse_replay_spec(data)
    return [(i.path, i.value, i.message) for i in err.value.issues]


@pytest.mark.parametrize(
    ("first_group", "expected"),
    [
        (
            {"model": "Llama-9B"},
            ("instance_groups[0].model", "Llama-9B", "unknown model (`litehit models` lists them)"),
        ),
        (
            {"kv_bytes_per_token": -2048},
            ("instance_groups[0].kv_bytes_per_token", -2048, "must be a positive integer"),
        ),
        (
            {"kv_bytes_per_token": 0},
            ("instance_groups[0].kv_bytes_per_token", 0, "must be a positive integer"),
        ),
        (
            {"model": "Llama-3.1-8B", "kv_bytes_per_token": 2048},
            (
                "instance_groups[0].kv_bytes_per_token",
                2048,
                "disagrees with model Llama-3.1-8B (131072 B/token in bf16): give one, or the same value",
            ),
        ),
        (
            {"model": "Llama-3.1-8B", "kv_dtype": "fp8", "kv_bytes_per_token": LLAMA_8B},
            (
                "instance_groups[0].kv_bytes_per_token",
                LLAMA_8B,
                "disagrees with model Llama-3.1-8B (65536 B/token in fp8): give one, or the same value",
            ),
        ),
        ({"kv_dtype": "fp8"}, ("instance_groups[0].kv_dtype", "fp8", "applies to model only")),
        (
            {"model": "Llama-3.1-8B", "kv_dtype": "int4"},
            ("instance_groups[0].kv_dtype", "int4", "expected one of bf16, fp16, fp8"),
        ),
    ],
)
def test_bad_kv_fields_are_one_error_naming_the_field(
    data_dir: Path, first_group: dict[str, Any], expected: tuple[str, Any, str]
) -> None:
    assert _issues(model_config(data_dir / "conversation_trace.jsonl", "out", **first_group)) == [expected]


def test_a_type_error_names_the_field(data_dir: Path) -> None:
    issues = _issues(model_config(data_dir / "conversation_trace.jsonl", "out", kv_bytes_per_token="2048"))
    assert [(path, value) for path, value, _ in issues] == [("instance_groups[0].kv_bytes_per_token", "2048")]


def test_stated_location_specs_must_agree_with_the_group(data_dir: Path) -> None:
    data = model_config(data_dir / "conversation_trace.jsonl", "out", model="Llama-3.1-8B")
    data["instances"][3]["location_spec_infos"][0]["size"] = 1 << 20
    assert _issues(data) == [
        (
            "instances[3].location_spec_infos",
            [{"name": "tp0", "size": 1 << 20}],
            "instance[b1024_ttl60]: its full spec group holds 1048576 bytes per block, its group ttl60's KV bytes "
            "give 131072 B/token x block_size 1024 = 134217728: leave the location specs out, or make them agree",
        )
    ]


def test_without_kv_fields_location_specs_stay_required() -> None:
    data = config(Path("t.jsonl"), Path("out"), groups=[group("g1")], instances=[instance("i1", 4)])
    for name in ("location_spec_infos", "location_spec_groups", "optimizer_state_info"):
        del data["instances"][0][name]
    paths = [path for path, _, _ in _issues(data)]
    assert paths == [
        "instances[0].location_spec_infos",
        "instances[0].optimizer_state_info.full_location_spec_group_name",
    ]


def test_a_cli_error_names_the_config_field(data_dir: Path, tmp_path: Path) -> None:
    data = model_config(data_dir / "conversation_trace.jsonl", "out", model="gpt-5")
    (tmp_path / "c.json").write_text(json.dumps(data))
    failed = run("replay", "c.json", cwd=tmp_path)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        "litehit: error: instance_groups[0].model: unknown model (`litehit models` lists them) (got 'gpt-5')"
    )


def test_a_shorthands_config_that_assumed_the_default_keeps_its_note(data_dir: Path, tmp_path: Path) -> None:
    from litehit.shorthand import Shorthand, shorthand_config
    from litehit.spec import TraceFormat

    assumed = shorthand_config(Shorthand(TraceFormat.MOONCAKE), str(data_dir / "conversation_trace.jsonl"), "a")
    given = shorthand_config(
        Shorthand(TraceFormat.MOONCAKE, model="Qwen3-8B"), str(data_dir / "conversation_trace.jsonl"), "b"
    )
    assert assumed["kv_bytes_assumed"] is True and "kv_bytes_assumed" not in given
    for name, data in (("a.json", assumed), ("b.json", given)):
        (tmp_path / name).write_text(json.dumps(data))
    out = {name: run("replay", name, cwd=tmp_path) for name in ("a.json", "b.json")}
    assert [o.returncode for o in out.values()] == [0, 0]
    assert out["a.json"].stdout.count("note: KV bytes per token not given: assuming 2048 B/token") == 1
    assert "note:" not in out["b.json"].stdout
