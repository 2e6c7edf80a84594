"""The replay shorthand: a trace plus a few options (block sizes, TTLs, KV bytes) standing for an
original offline config with one lane per block size x TTL. The CLI (flags) and the API (body
fields) both expand it here; errors name the option the way its user typed it.

- one instance group per TTL (``ttl<seconds>``), one instance per block size in each group,
  ``b<size>`` (plus ``_ttl<seconds>`` for a TTL other than 0);
- KV bytes of an analysis block: ``kv_bytes_per_token x block_size`` (from ``model`` and
  ``kv_dtype``, or given, or the 2 KiB/token default), or ``block_bytes`` per trace block scaled
  to the block size; at most one of ``model``, ``kv_bytes_per_token`` and ``block_bytes``;
- hybrid models: ``linear_step`` (tokens, a multiple of every block size) and ``linear_state_bytes``
  (one saved linear-attention state) together make every lane a hybrid lane (HYBRID_G5.md); a
  hybrid ``model`` gives the state bytes itself (in its ``kv_dtype``), and ``linear_step`` then
  defaults to the least common multiple of the block sizes (a state at every block of one lane);
- several lanes fan every read out to all of them; one lane takes every read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from litehit.errors import ConfigError, ConfigIssue
from litehit.kv_models import (
    DEFAULT_BYTES_PER_TOKEN,
    DEFAULT_KV_DTYPE,
    KV_BYTES_ASSUMED,
    KV_BYTES_OPTIONS,
    KV_DTYPE_BYTES,
    model_named,
)
from litehit.limits import LANES_MAX
from litehit.spec import TraceFormat
from litehit.traces.format_table import FORMATS

__all__ = ["DEFAULT_BYTES_PER_TOKEN", "DEFAULT_TRACE_BLOCK", "KV_BYTES_OPTIONS", "Shorthand", "shorthand_config"]

DEFAULT_TRACE_BLOCK = {TraceFormat(f.name): f.default_trace_block for f in FORMATS}

Namer = Callable[[str], str]  # an option's field name -> the name its user typed


@dataclass(frozen=True)
class Shorthand:
    """The shorthand options, as given (None: not given)."""

    trace_format: TraceFormat
    block_size: int | None = None  # tokens per block of the trace
    block_sizes: Sequence[int] | None = None  # analysis block sizes (default: block_size)
    ttl_seconds: Sequence[int] = (0,)
    model: str | None = None
    kv_dtype: str | None = None
    kv_bytes_per_token: int | None = None
    block_bytes: int | None = None  # KV bytes of one trace block
    prefix_hash: bool | None = None
    workers: int | None = None
    extended: bool = False
    linear_step: int | None = None  # hybrid lanes: tokens between saved states
    linear_state_bytes: int | None = None  # hybrid lanes: bytes of one saved state

    @property
    def assumes_kv_bytes(self) -> bool:
        """True when no option gives the KV bytes (the 2 KiB/token default applies)."""
        return all(getattr(self, o) is None for o in KV_BYTES_OPTIONS)


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or value < 1:
        raise ConfigError([ConfigIssue(name, value, "must be a positive integer")])
    return value


def _kv_bytes_per_token(s: Shorthand, name: Namer) -> int:
    given = [o for o in KV_BYTES_OPTIONS if getattr(s, o) is not None]
    if len(given) > 1:
        first, second = given[:2]
        raise ConfigError(
            [ConfigIssue(name(second), getattr(s, second), f"cannot be combined with {name(first)} (give one)")]
        )
    if s.kv_dtype is not None and s.model is None:
        raise ConfigError([ConfigIssue(name("kv_dtype"), s.kv_dtype, f"applies to {name('model')} only")])
    if s.kv_dtype is not None and s.kv_dtype not in KV_DTYPE_BYTES:
        raise ConfigError([ConfigIssue(name("kv_dtype"), s.kv_dtype, f"expected one of {', '.join(KV_DTYPE_BYTES)}")])
    if s.model is not None:
        preset = model_named(s.model)
        if preset is None:
            raise ConfigError([ConfigIssue(name("model"), s.model, "unknown model (`litehit models` lists them)")])
        return preset.bytes_per_token(s.kv_dtype or DEFAULT_KV_DTYPE)
    if s.kv_bytes_per_token is None:
        return DEFAULT_BYTES_PER_TOKEN
    return _positive(name("kv_bytes_per_token"), s.kv_bytes_per_token)


def _linear(s: Shorthand, sizes: Sequence[int], name: Namer) -> tuple[int, int] | None:
    """(linear_step, state bytes) of hybrid lanes, or None; both options or neither, or a hybrid
    model (its state bytes, the step given or the block sizes' least common multiple)."""
    preset = None if s.model is None else model_named(s.model)
    if preset is not None and preset.is_hybrid:
        if s.linear_state_bytes is not None:
            raise ConfigError(
                [
                    ConfigIssue(
                        name("linear_state_bytes"),
                        s.linear_state_bytes,
                        f"cannot be combined with {name('model')} {preset.name} (its states are "
                        f"{preset.state_bytes(s.kv_dtype or DEFAULT_KV_DTYPE):,} bytes; give "
                        f"{name('kv_bytes_per_token')} instead of {name('model')} for other sizes)",
                    )
                ]
            )
        step = math.lcm(*sizes) if s.linear_step is None else s.linear_step
        s = replace(s, linear_step=step, linear_state_bytes=preset.state_bytes(s.kv_dtype or DEFAULT_KV_DTYPE))
    if s.linear_step is None and s.linear_state_bytes is None:
        return None
    if s.linear_step is None or s.linear_state_bytes is None:
        given, missing = ("linear_step", "linear_state_bytes") if s.linear_state_bytes is None else (
            "linear_state_bytes", "linear_step")  # fmt: skip
        raise ConfigError([ConfigIssue(name(given), getattr(s, given), f"needs {name(missing)} too (hybrid lanes)")])
    step = _positive(name("linear_step"), s.linear_step)
    state = _positive(name("linear_state_bytes"), s.linear_state_bytes)
    for bs in sizes:
        if step % bs:
            raise ConfigError(
                [ConfigIssue(name("linear_step"), step, f"tokens must be a multiple of the block size {bs}")]
            )
    return step, state


def shorthand_config(
    s: Shorthand, trace_file_path: str, output_result_path: str, *, name: Namer = lambda field: field
) -> dict[str, Any]:
    """The original config the shorthand stands for; ConfigError naming the option by name()."""
    trace_bs = (
        DEFAULT_TRACE_BLOCK[s.trace_format] if s.block_size is None else _positive(name("block_size"), s.block_size)
    )
    sizes = list(s.block_sizes) if s.block_sizes is not None else [trace_bs]
    ttls = list(s.ttl_seconds)
    if not sizes or any(isinstance(v, bool) or v < 1 for v in sizes):
        raise ConfigError([ConfigIssue(name("block_sizes"), s.block_sizes, "expected positive integers")])
    if not ttls or any(isinstance(v, bool) or v < 0 for v in ttls):
        raise ConfigError([ConfigIssue(name("ttl_seconds"), s.ttl_seconds, "expected integers >= 0")])
    if len(sizes) * len(ttls) > LANES_MAX:
        raise ConfigError(
            [
                ConfigIssue(
                    name("block_sizes"),
                    f"{len(sizes)} block sizes x {len(ttls)} TTLs",
                    f"at most {LANES_MAX:,} lanes (block sizes x TTLs)",
                )
            ]
        )
    per_block = None if s.block_bytes is None else _positive(name("block_bytes"), s.block_bytes)
    per_token = _kv_bytes_per_token(s, name)
    linear = _linear(s, sizes, name)
    groups, instances = [], []
    for ttl in ttls:
        group: dict[str, Any] = {"name": f"ttl{ttl}", "ttl_seconds": ttl}
        if s.prefix_hash is not None:
            group["enable_prefix_hash"] = s.prefix_hash
        groups.append(group)
        for bs in sizes:
            block_bytes = per_token * bs if per_block is None else per_block * bs // trace_bs
            inst: dict[str, Any] = {
                "instance_group_name": group["name"],
                "instance_id": f"b{bs}" + (f"_ttl{ttl}" if ttl else ""),
                "block_size": bs,
                "location_spec_infos": [{"name": "kv", "size": block_bytes}],
                "location_spec_groups": [{"name": "full", "spec_names": ["kv"]}],
                "optimizer_state_info": {"full_location_spec_group_name": "full"},
            }
            if linear is not None:
                step, state = linear
                inst["linear_step"] = step
                inst["location_spec_infos"].append({"name": "state", "size": state})
                inst["location_spec_groups"].append({"name": "linear", "spec_names": ["state"]})
                inst["optimizer_state_info"]["linear_location_spec_group_name"] = "linear"
            instances.append(inst)
    config: dict[str, Any] = {
        "trace_file_path": trace_file_path,
        "output_result_path": output_result_path,
        "block_size": trace_bs,
        "trace_format": s.trace_format.value,
        "instance_groups": groups,
        "instances": instances,
        "pipeline_worker_count": s.workers or 2,
        "facts_format": "extended" if s.extended else "standard",
    }
    if s.assumes_kv_bytes:
        config[KV_BYTES_ASSUMED] = True  # so that every output of the job can say so
    if len(instances) > 1:
        config["fanout_all_instances"] = True
    else:
        config["override_instance_id"] = instances[0]["instance_id"]
    return config
