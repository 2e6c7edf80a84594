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
    "Qwen3-Next-80B-A3B": 24_576,  # its 12 full-attention layers: 12 x 2 x 256 x 2 x 2
    "DeepSeek-V3": 70_272,  # 61 x (512 + 64) x 2
}
# A hybrid model's state, by hand from config.json: linear layers x (value heads x key dim x value
# dim + (2 x key heads x key dim + value heads x value dim) x (conv kernel - 1)) x 2 bytes (bf16).
BF16_STATE_BYTES = {"Qwen3-Next-80B-A3B": 36 * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3) * 2}


def test_every_preset_matches_the_hand_computation() -> None:
    assert {m.name: m.bytes_per_token() for m in MODELS} == BF16_BYTES_PER_TOKEN
    for m in MODELS:
        assert m.bytes_per_token("fp16") == BF16_BYTES_PER_TOKEN[m.name]
        assert m.bytes_per_token("fp8") * 2 == BF16_BYTES_PER_TOKEN[m.name]
    assert model_named("deepseek-v3") is model_named("DeepSeek-V3") is MODELS[-1]
    assert model_named("gpt-2") is None
    assert (
        {m.name: m.state_bytes() for m in MODELS if m.is_hybrid}
        == BF16_STATE_BYTES
        == {"Qwen3-Next-80B-A3B": 39_518_208}
    )
    assert all(m.state_bytes() == 0 for m in MODELS if not m.is_hybrid)


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
    assert lines[0].split() == [
        "model", "bf16/fp16", "B/token", "fp8", "B/token", "state", "B", "(bf16)", "shape", "(config.json)",
    ]  # fmt: skip
    assert len(lines) == 1 + len(BF16_BYTES_PER_TOKEN)
    for line, (name, per_token) in zip(lines[1:], BF16_BYTES_PER_TOKEN.items(), strict=True):
        state = f"{BF16_STATE_BYTES[name]:,}" if name in BF16_STATE_BYTES else "-"
        assert line.split()[:4] == [name, f"{per_token:,}", f"{per_token // 2:,}", state]
    assert lines[1].endswith("32 layers x 8 KV heads x 128 head dim x 2 (K, V)")
    (hybrid,) = [line for line in lines if line.startswith("Qwen3-Next")]
    assert hybrid.endswith(
        "12 layers x 2 KV heads x 256 head dim x 2 (K, V); state: 36 linear layers x 548,864 elements"
    )
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


# A hybrid preset: Qwen3-Next's 12 full-attention layers give the block bytes, its 36 Gated
# DeltaNet layers the state bytes (BF16_STATE_BYTES), a state every block by default.
QWEN3_NEXT = "Qwen3-Next-80B-A3B"


def lanes_of(trace: Path, *flags: str) -> list[dict[str, object]]:
    argv = ["replay", str(trace), "--block-sizes", "512,1024", *flags]
    return shorthand_config(build_parser(argv).parse_args(argv), "unused")["instances"]


@pytest.mark.parametrize(
    ("flags", "per_token", "state", "step"),
    [
        ([], 24_576, 39_518_208, 1024),  # the step: the least common multiple of 512 and 1024
        (["--kv-dtype", "fp8"], 12_288, 19_759_104, 1024),
        (["--linear-step", "4096"], 24_576, 39_518_208, 4096),
    ],
)
def test_a_hybrid_model_makes_hybrid_lanes_as_the_explicit_flags_do(
    small_trace: Path, flags: list[str], per_token: int, state: int, step: int
) -> None:
    by_model = lanes_of(small_trace, "--model", QWEN3_NEXT, *flags)
    explicit = ["--kv-bytes-per-token", str(per_token), "--linear-step", str(step), "--linear-state-bytes", str(state)]
    assert by_model == lanes_of(small_trace, *explicit)
    assert [(i["linear_step"], i["location_spec_infos"]) for i in by_model] == [
        (step, [{"name": "kv", "size": per_token * bs}, {"name": "state", "size": state}]) for bs in (512, 1024)
    ]


@pytest.mark.parametrize(
    ("flags", "flag", "words"),
    [
        (["--linear-state-bytes", "4096"], "--linear-state-bytes", f"cannot be combined with --model {QWEN3_NEXT}"),
        (["--linear-step", "1536"], "--linear-step", "multiple of the block size 1024"),
        (["--linear-step", "0"], "--linear-step", "positive integer"),
    ],
)
def test_a_hybrid_model_refuses_what_contradicts_it(
    small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], flag: str, words: str
) -> None:
    argv = ["replay", str(small_trace), "--block-sizes", "512,1024", "--model", QWEN3_NEXT, *flags]
    code, _, err = run([*argv, "-o", str(tmp_path / "bad")], capsys)
    assert code == 1 and err.startswith(f"litehit: error: {flag}: ") and words in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "bad" / "litehit_facts.csv").exists()


def test_a_hybrid_model_replay_writes_byte_step_facts(small_trace: Path, tmp_path: Path) -> None:
    """End to end: --model of a hybrid preset writes the same facts as the explicit flags, bytes: rows."""
    outs = {}
    for name, flags in [
        ("model", ["--model", QWEN3_NEXT]),
        ("flags", ["--kv-bytes-per-token", "24576", "--linear-step", "512", "--linear-state-bytes", "39518208"]),
    ]:
        outs[name] = tmp_path / name
        done = subprocess.run(
            [LITEHIT, "replay", str(small_trace), *flags, "-o", str(outs[name])], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    facts = (outs["model"] / "litehit_facts.csv").read_bytes()
    assert facts == (outs["flags"] / "litehit_facts.csv").read_bytes()
    rows = list(csv.DictReader(facts.decode().splitlines()))
    assert rows and all(r["hit_curve"].startswith("bytes:") for r in rows)
    assert {r["block_bytes"] for r in rows} == {str(24_576 * 512)}


def test_a_config_group_with_a_hybrid_model_refuses_a_full_only_instance(tmp_path: Path, data_dir: Path) -> None:
    config = {
        "trace_file_path": str(data_dir / "conversation_trace.jsonl"),
        "output_result_path": str(tmp_path / "out"),
        "block_size": 512,
        "instance_groups": [{"name": "g", "model": QWEN3_NEXT}],
        "instances": [{"instance_group_name": "g", "instance_id": "b512", "block_size": 512}],
    }
    (tmp_path / "c.json").write_text(json.dumps(config))
    done = subprocess.run([LITEHIT, "replay", str(tmp_path / "c.json")], capture_output=True, text=True)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("litehit: error: instances[0].linear_step: instance[b512]: model Qwen3-Next-80B-A3B")
    assert "is hybrid (36 linear-attention layers" in done.stderr and not (tmp_path / "out").exists()


def test_a_hybrid_instance_without_location_specs_is_refused(tmp_path: Path, data_dir: Path) -> None:
    """A group's model (hybrid or not) sizes Full blocks only: a linear_step instance that leaves
    its specs out has no state size and would replay as Full-only, so it is refused."""
    for model in (QWEN3_NEXT, "Llama-3.1-8B"):
        config = {
            "trace_file_path": str(data_dir / "conversation_trace.jsonl"),
            "output_result_path": str(tmp_path / "out"),
            "block_size": 512,
            "instance_groups": [{"name": "g", "model": model}],
            "instances": [{"instance_group_name": "g", "instance_id": "h", "block_size": 512, "linear_step": 512}],
        }
        (tmp_path / "c.json").write_text(json.dumps(config))
        done = subprocess.run([LITEHIT, "replay", str(tmp_path / "c.json")], capture_output=True, text=True)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("litehit: error: instances[0].location_spec_infos: instance[h] is a hybrid lane")
        assert not (tmp_path / "out").exists()
