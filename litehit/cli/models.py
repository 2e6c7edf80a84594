"""``litehit models``: the model presets of ``--model``, their KV-cache shapes and bytes per token."""

from __future__ import annotations

import argparse
from typing import Any

from litehit.cli.commands import COMMAND_HELP
from litehit.kv_models import MODELS

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "models",
        help=COMMAND_HELP["models"],
        description=(
            "The models --model knows, with the config.json shape their KV bytes per token come from\n"
            "(a hybrid model's: its full-attention layers; its linear layers' state bytes beside).\n\n"
            "  litehit replay TRACE --model Llama-3.1-8B [--kv-dtype fp8]"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    rows = [("model", "bf16/fp16 B/token", "fp8 B/token", "state B (bf16)", "shape (config.json)")]
    rows += [
        (
            m.name,
            f"{m.bytes_per_token('bf16'):,}",
            f"{m.bytes_per_token('fp8'):,}",
            f"{m.state_bytes('bf16'):,}" if m.is_hybrid else "-",
            m.shape(),
        )
        for m in MODELS
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for name, bf16, fp8, state, shape in rows:
        print(f"{name:<{widths[0]}}  {bf16:>{widths[1]}}  {fp8:>{widths[2]}}  {state:>{widths[3]}}  {shape}")
    return 0
