"""The trace input every trace command shares (replay, policies, ...): an original offline config
file, or a trace plus shorthand options that stand for one (one lane per block size x TTL)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.errors import ConfigError, ConfigIssue
from litehit.kv_models import (
    DEFAULT_BYTES_PER_TOKEN,
    DEFAULT_KV_DTYPE,
    KV_BYTES_ASSUMED,
    KV_BYTES_OPTIONS,
    KV_DTYPE_BYTES,
    MODELS,
    model_named,
)
from litehit.traces.format_table import FORMATS

if TYPE_CHECKING:  # the config models (pydantic) load when a command runs, not to declare it
    from litehit.spec import ReplaySpec

__all__ = [
    "add_trace_arguments",
    "default_kv_note",
    "lane_legend",
    "shorthand_config",
    "spec_from_args",
]

_SHORTHAND = ("format", "block_size", "block_sizes", *KV_BYTES_OPTIONS, "kv_dtype", "prefix_hash")


def add_trace_arguments(p: argparse.ArgumentParser, *, source_required: bool = True) -> None:
    """The positional source and the shorthand options (not -o, which each command defines)."""
    p.add_argument(
        "source", nargs=None if source_required else "?", help="an offline config JSON file, or a trace file"
    )
    p.add_argument("--format", choices=[f.name for f in FORMATS], help="trace format (default: detected)")
    p.add_argument(
        "--block-size",
        type=int,
        help="tokens per block of the trace (default: "
        + ", ".join(f"{f.default_trace_block} {f.name}" for f in FORMATS)
        + ")",
    )
    p.add_argument(
        "--block-sizes",
        help="analysis block sizes, comma separated multiples of --block-size (default: --block-size)",
    )
    p.add_argument(
        "--ttl-seconds",
        default="0",
        help="fixed TTL per lane group, comma separated; 0 = pure LRU (default 0)",
    )
    p.add_argument(
        "--model",
        type=_model_name,
        choices=[m.name for m in MODELS],
        metavar="NAME",
        help="KV bytes per token from this model's shape (case-insensitive; `litehit models` lists them): "
        + ", ".join(m.name for m in MODELS),
    )
    p.add_argument("--kv-bytes-per-token", type=int, metavar="B", help="KV-cache bytes of one token")
    p.add_argument(
        "--kv-dtype",
        choices=list(KV_DTYPE_BYTES),
        help=f"KV-cache element type of --model (default: {DEFAULT_KV_DTYPE})",
    )
    p.add_argument(
        "--block-bytes",
        type=int,
        help=f"KV-cache bytes of one trace block (default: {DEFAULT_BYTES_PER_TOKEN} bytes per token,"
        " or from --model / --kv-bytes-per-token)",
    )
    p.add_argument(
        "--prefix-hash",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="chain per-block hashes into prefix keys (default: on for qwen_bailian only)",
    )
    p.add_argument("--linear-step", type=int, metavar="TOKENS",
                   help="hybrid model: a linear-attention (Mamba) state is saved every TOKENS tokens "
                        "(a multiple of the block sizes; with --linear-state-bytes)")  # fmt: skip
    p.add_argument("--linear-state-bytes", type=int, metavar="B",
                   help="hybrid model: bytes of one saved linear-attention state (with --linear-step)")  # fmt: skip
    p.add_argument("--workers", type=int, default=None, help="parsing threads (pipeline_worker_count)")


def _is_config(path: Path) -> bool:
    """A config is a regular file holding one JSON object with config fields (a trace is JSONL,
    possibly compressed, possibly a pipe that must not be read here)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(1 << 20)
        data = json.loads(head)
    except (OSError, ValueError, RecursionError):  # RecursionError: nesting too deep for a config
        return False
    return isinstance(data, dict) and bool({"instances", "instance_groups", "trace_file_path"} & data.keys())


def shorthand_config(args: argparse.Namespace, output_dir: str) -> dict[str, Any]:
    """The original config that the shorthand options stand for."""
    from litehit.spec import TraceFormat
    from litehit.traces.formats import detect_format

    fmt = TraceFormat(args.format) if args.format else detect_format(args.source)
    if fmt is None:
        raise SystemExit(f"litehit: error: {args.source}: the trace has no rows")
    from litehit.shorthand import Shorthand
    from litehit.shorthand import shorthand_config as expand_shorthand

    options = Shorthand(
        trace_format=fmt,
        block_size=args.block_size,
        block_sizes=_integers("--block-sizes", args.block_sizes, least=1) if args.block_sizes else None,
        ttl_seconds=_integers("--ttl-seconds", str(args.ttl_seconds), least=0),
        model=getattr(args, "model", None),
        kv_dtype=getattr(args, "kv_dtype", None),
        kv_bytes_per_token=getattr(args, "kv_bytes_per_token", None),
        block_bytes=args.block_bytes,
        prefix_hash=args.prefix_hash,
        workers=args.workers,
        extended=getattr(args, "extended", False),
        linear_step=getattr(args, "linear_step", None),
        linear_state_bytes=getattr(args, "linear_state_bytes", None),
    )
    return expand_shorthand(options, str(args.source), output_dir, name=_flag)


def _model_name(text: str) -> str:
    """The preset's own spelling of a --model value (argparse then checks it is one)."""
    model = model_named(text)
    return text if model is None else model.name


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _integers(flag: str, text: str, *, least: int) -> list[int]:
    """A comma separated list of integers >= least; ConfigError naming the flag otherwise."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < least for v in values):
        kind = "positive integers" if least == 1 else f"integers >= {least}"
        raise ConfigError([ConfigIssue(flag, text, f"expected comma separated {kind}")])
    return values


def default_kv_note(args: argparse.Namespace) -> str | None:
    """The line every output of a shorthand run carries when the KV bytes were not given."""
    source = Path(args.source)
    if (  # a config file states its own block bytes, unless it is a shorthand's that assumed them
        _is_config(source) and not args.format and json.loads(source.read_bytes()).get(KV_BYTES_ASSUMED) is not True
    ):
        return None
    if any(getattr(args, flag, None) for flag in KV_BYTES_OPTIONS):
        return None
    return (
        f"note: KV bytes per token not given: assuming {DEFAULT_BYTES_PER_TOKEN} B/token "
        "(use --model or --kv-bytes-per-token; `litehit models` lists the presets)"
    )


def spec_from_args(args: argparse.Namespace, output_dir: str) -> ReplaySpec:
    """The replay spec of a command line: the config file as is (with --workers), or the
    shorthand's config with its output in output_dir. Unknown config fields are warned about."""
    from litehit.spec import load_replay_config, parse_replay_spec

    source = Path(args.source)
    if not args.format and _is_config(source):
        given = [o for o in _SHORTHAND if getattr(args, o)]
        if given:
            raise SystemExit(f"litehit: error: {_flag(given[0])} cannot be combined with a config file")
        spec = load_replay_config(source)
        if args.workers:
            spec = spec.model_copy(update={"pipeline_worker_count": args.workers})
    else:
        spec = parse_replay_spec(shorthand_config(args, output_dir))
    for name in spec.unknown_fields():
        print(f"litehit: warning: ignoring unknown config field {name}", file=sys.stderr)
    used = {i.instance_group_name for i in spec.instances}
    for group in spec.instance_groups:
        if group.name not in used:
            print(f"litehit: warning: instance group {group.name} has no instances: it gives no lane", file=sys.stderr)
    return spec


def lane_legend(spec: ReplaySpec) -> str:
    """What the shorthand's lane names mean, for the lanes of this spec: ``b512 = 512-token
    blocks, no TTL; b512_ttl60 = 512-token blocks, TTL 60 s (blocks unused that long expire)``."""
    parts = []
    for inst in spec.instances:
        ttl = spec.group_of(inst).ttl_seconds
        parts.append(f"{inst.instance_id} = {inst.block_size}-token blocks, " + (f"TTL {ttl} s" if ttl else "no TTL"))
    ttl_note = (
        " (a block unused for its TTL expires)" if any(spec.group_of(i).ttl_seconds for i in spec.instances) else ""
    )
    return "lanes: " + "; ".join(parts) + ttl_note
