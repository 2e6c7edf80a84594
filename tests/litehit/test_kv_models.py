"""KV bytes per token from the model: the preset table, the shorthand flags that use it (--model,
--kv-bytes-per-token, --kv-dtype, at most one of them with --block-bytes) and ``litehit models``."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from litehit.cli import build_parser, main
from litehit.cli.trace_input import shorthand_config
from litehit.kv_models import MODELS, model_named

LITEHIT = str(Path(sys.executable).with_name("litehit"))

# By hand from each config.json: layers x KV heads x head dim x 2 (K, V) x 2 bytes (bf16);
# MLA: layers x (kv_lora_rank + qk_rope_head_dim) x 2 bytes.
BF16_BYTES_PER_TOKEN = {
    "Llama-3.1-8B": 131_072,  # 32 x 8 x 128 x 2 x 2
    "Llama-3.1-70B": 327_680,  # 80 x 8 x 128 x 2 x 2
    "Qwen2.5-7B": 57_344,  # 28 x 4 x 128 x 2 x 2
    "Qwen2.5-72B": 327_680,  # 80 x 8 x 128 x 2 x 2
    "Qwen3-8B": 147_456,  # 36 x 8 x 128 x 2 x 2
    "Qwen3-32B": 262_144,  # 64 x 8 x 128 x 2 x 2
    "Mistral-7B": 131_072,  # 32 x 8 x 128 x 2 x 2
    "DeepSeek-V3": 70_272,  # 61 x (512 + 64) x 2
}


def test_every_preset_matches_the_hand_computation() -> None:
    assert {m.name: m.bytes_per_token() for m in MODELS} == BF16_BYTES_PER_TOKEN
    for m in MODELS:
        assert m.bytes_per_token("fp16") == BF16_BYTES_PER_TOKEN[m.name]
        assert m.bytes_per_token("fp8") * 2 == BF16_BYTES_PER_TOKEN[m.name]
    assert model_named("deepseek-v3") is model_named("DeepSeek-V3") is MODELS[-1]
    assert model_named("gpt-2") is None


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:200]
    path = tmp_path_factory.mktemp("kv-models") / "trace.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def lane_block_bytes(trace: Path, *flags: str) -> dict[str, int]:
    argv = ["replay", str(trace), "--block-sizes", "512,1024", *flags]
    args = build_parser(argv).parse_args(argv)
    config = shorthand_config(args, "unused")
    return {i["instance_id"]: i["location_spec_infos"][0]["size"] for i in config["instances"]}


@pytest.mark.parametrize(
    ("flags", "per_token"),
    [
        (["--model", "Qwen2.5-7B"], 57_344),
        (["--model", "qwen2.5-7b"], 57_344),
        (["--model", "DEEPSEEK-V3", "--kv-dtype", "fp8"], 35_136),
        (["--model", "Llama-3.1-70B", "--kv-dtype", "fp16"], 327_680),
        (["--kv-bytes-per-token", "1000"], 1000),
    ],
)
def test_shorthand_block_bytes_are_bytes_per_token_times_block_size(
    small_trace: Path, flags: list[str], per_token: int
) -> None:
    assert lane_block_bytes(small_trace, *flags) == {"b512": per_token * 512, "b1024": per_token * 1024}


def test_a_replay_writes_the_model_block_bytes(data_dir: Path, tmp_path: Path) -> None:
    trace = data_dir / "conversation_trace.jsonl"
    out = tmp_path / "out"
    done = subprocess.run(
        [LITEHIT, "replay", str(trace), "--model", "Llama-3.1-8B", "--block-sizes", "512,1024", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with (out / "litehit_facts.csv").open(newline="") as f:
        lanes = {(r["instance_id"], r["block_bytes"]) for r in csv.DictReader(f)}
    assert lanes == {("b512", str(131_072 * 512)), ("b1024", str(131_072 * 1024))}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


COMMANDS = {
    "replay": [],
    "policies": ["--capacity-gb", "1"],
    "window": ["--capacity-gb", "1"],
}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--model", "Qwen3-8B", "--kv-bytes-per-token", "4096"],
            "--kv-bytes-per-token: cannot be combined with --model (give one) (got 4096)",
        ),
        (
            ["--block-bytes", "65536", "--model", "Qwen3-8B"],
            "--block-bytes: cannot be combined with --model (give one) (got 65536)",
        ),
        (
            ["--kv-bytes-per-token", "4096", "--block-bytes", "65536"],
            "--block-bytes: cannot be combined with --kv-bytes-per-token (give one) (got 65536)",
        ),
    ],
)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_two_ways_of_giving_kv_bytes_are_refused_naming_both(
    small_trace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flags: list[str],
    message: str,
) -> None:
    out = tmp_path / "never-written"
    code, _, err = run([command, str(small_trace), *flags, *COMMANDS[command], "-o", str(out)], capsys)
    assert code == 1
    assert err == f"litehit: error: {message}\n"
    assert not out.exists()


def test_kv_dtype_needs_a_model_and_a_config_file_takes_no_model(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["replay", str(small_trace), "--kv-dtype", "fp8", "-o", str(tmp_path / "x")], capsys)
    assert (code, err) == (1, "litehit: error: --kv-dtype: applies to --model only (got 'fp8')\n")
    code, _, err = run(["replay", str(small_trace), "--kv-bytes-per-token", "0", "-o", str(tmp_path / "x")], capsys)
    assert (code, err) == (1, "litehit: error: --kv-bytes-per-token: must be a positive integer (got 0)\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"trace_file_path": str(small_trace), "block_size": 512, "instances": []}))
    with pytest.raises(SystemExit, match="--model cannot be combined with a config file"):
        main(["replay", str(config), "--model", "Qwen3-8B"])


def test_models_lists_every_preset_with_shape_and_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["models"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["model", "bf16/fp16", "B/token", "fp8", "B/token", "shape", "(config.json)"]
    assert len(lines) == 1 + len(BF16_BYTES_PER_TOKEN)
    for line, (name, per_token) in zip(lines[1:], BF16_BYTES_PER_TOKEN.items(), strict=True):
        assert line.split()[:3] == [name, f"{per_token:,}", f"{per_token // 2:,}"]
    assert lines[1].endswith("32 layers x 8 KV heads x 128 head dim x 2 (K, V)")
    assert lines[-1].endswith("61 layers x (512 kv_lora_rank + 64 qk_rope_head_dim) MLA")


@pytest.mark.parametrize("command", ["replay", "policies", "window"])
def test_every_output_says_when_the_default_kv_bytes_are_assumed(
    command: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from litehit.cli import main

    trace = str(data_dir / "conversation_trace.jsonl")
    extra = {
        "replay": ["-o", str(tmp_path / "f")],
        "policies": ["--capacity-gb", "1"],
        "window": ["--capacity-gb", "1"],
    }
    note = "note: KV bytes per token not given: assuming 2048 B/token"
    assert main([command, trace, *extra[command]]) == 0
    assert note in capsys.readouterr().out
    assert main([command, trace, "--model", "llama-3.1-8b", *extra[command]]) == 0
    assert note not in capsys.readouterr().out
