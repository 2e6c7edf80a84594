"""The replay spec: the original LiteHit offline config JSON, accepted as is, plus our additions.

Structure and JSON types are checked by pydantic (a wrong JSON type fails, as in the original:
``"block_size": "256"`` or ``-1`` is rejected; an integral double such as ``256.0`` is accepted).
``check_replay_spec`` then applies the original runner's semantic rules in its order, with its
reasons. Every failure is a ConfigError whose issues name the field path and the bad value.

Additions to the original config: ``trace_format`` (detected from the first row when absent),
``facts_format`` ("standard" = the 7 original columns, "extended" = plus complete_blocks and
cut_reason for miss attribution), and per instance group the KV bytes of its lanes (``model``
with ``kv_dtype``, or ``kv_bytes_per_token``: see ReplayInstanceGroup).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Set as AbstractSet
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from litehit.errors import ConfigError, ConfigIssue
from litehit.kv_models import DEFAULT_KV_DTYPE, KV_DTYPE_BYTES, model_named
from litehit.limits import CAPACITIES_MAX, GROUPS_MAX, LANES_MAX, NAME_MAX, SPECS_MAX
from litehit.text import Text, no_nul

__all__ = [
    "InstanceGroup",
    "InstanceInfo",
    "LocationSpecGroup",
    "LocationSpecInfo",
    "ReplayInstanceGroup",
    "ReplaySpec",
    "StateInfo",
    "Text",
    "TraceFormat",
    "check_replay_spec",
    "config_error",
    "error_subject",
    "group_issues",
    "instance_issues",
    "load_replay_config",
    "parse_replay_spec",
]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
MAX_PIPELINE_WORKERS = 64
MAX_EXTRA_DEPTH = 32
"""How deeply an unknown (kept, unused) config field may nest."""
PLAIN_JSON = "plain_json"  # the error type of an unknown field that is not plain JSON


class TraceFormat(StrEnum):
    STANDARD = "standard"
    MOONCAKE = "mooncake"
    QWEN_BAILIAN = "qwen_bailian"
    PUBLISHER_LOG = "publisher_log"


def _json_integer(lo: int, hi: int) -> BeforeValidator:
    """An integer field with the original JSON helper's rules: no strings or booleans, doubles
    only when lossless, and the C++ type's range."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("expected an integer")
        if isinstance(value, float):
            if not (math.isfinite(value) and value.is_integer()):
                raise ValueError("expected an integer (a double must be lossless)")
            value = int(value)
        if not lo <= value <= hi:
            raise ValueError(f"integer out of range [{lo}, {hi}]")
        return int(value)

    return BeforeValidator(check)


def _json_double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError("number out of range (beyond a double)") from None


Name = Annotated[StrictStr, StringConstraints(max_length=NAME_MAX), AfterValidator(no_nul)]
"""A name or id stored in SQL (an instance, a group): at most NAME_MAX characters."""
Int32 = Annotated[int, _json_integer(*INT32)]
Int64 = Annotated[int, _json_integer(*INT64)]
UInt64 = Annotated[int, _json_integer(*UINT64)]
Double = Annotated[float, BeforeValidator(_json_double)]


def _plain_json_issue(value: Any) -> tuple[Any, str] | None:
    """What keeps a kept unknown field from being stored as JSON (NaN/Infinity, too deep nesting):
    (the offending value, the reason), or None."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return item, "holds a number JSON cannot carry (NaN or Infinity)"
        if isinstance(item, dict | list):
            if depth > MAX_EXTRA_DEPTH:
                return f"<nested deeper than {MAX_EXTRA_DEPTH} levels>", f"nests deeper than {MAX_EXTRA_DEPTH} levels"
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return None


class _Section(BaseModel):
    # Unknown fields are kept (and reported as warnings by the CLI), never an error: existing
    # configs may carry fields of the online optimizer that a replay does not use. They must be
    # plain JSON, though: jobs store their config.
    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="after")
    def _plain_extras(self) -> _Section:
        for name, value in (self.model_extra or {}).items():
            found = _plain_json_issue(value)
            if found:
                raise PydanticCustomError(PLAIN_JSON, "unknown field " + found[1], {"field": name, "value": found[0]})
        return self


class InstanceGroup(_Section):
    name: Name = Field(default="", description="the group's name; instances join it by instance_group_name")
    capacity_gb: list[Double] = Field(
        default_factory=list,
        max_length=CAPACITIES_MAX,
        description="capacity slots in binary GiB (online: hits and rates per slot; a replay's facts hold every "
        "capacity)",
    )
    eviction_policy: Text = Field(default="lru", description='must be "lru"')
    shared_group_quota: StrictBool = Field(default=False, description="must be false (not supported)")
    enable_theoretical_max_cache: StrictBool = Field(
        default=False, description="online: also report the hits of an infinite cache"
    )
    ttl_seconds: Int64 = Field(default=0, description="blocks unused this long expire (0: pure LRU)")
    enable_prefix_hash: StrictBool | None = Field(
        default=None, description="chain block hashes into prefix keys (null: on for qwen_bailian traces, else off)"
    )

    def prefix_hash_for(self, fmt: TraceFormat) -> bool:
        """Decision 1: qwen_bailian traces carry per-block hashes, so the default is on."""
        if self.enable_prefix_hash is not None:
            return self.enable_prefix_hash
        return fmt is TraceFormat.QWEN_BAILIAN

    @property
    def ttl_ns(self) -> int:
        return self.ttl_seconds * 1_000_000_000


class ReplayInstanceGroup(InstanceGroup):
    """An instance group of a replay config: the original fields, plus (optional) the KV-cache
    bytes per token of its lanes, as the shorthand's --model / --kv-bytes-per-token. With them, an
    instance of the group may leave out its location specs (block bytes = KV bytes per token x
    its block_size); an instance that gives them anyway must hold exactly that many bytes per
    block. ``model`` and ``kv_bytes_per_token`` together must agree. Without either, the
    instances state their block bytes as in the original (no default is assumed)."""

    model: Text | None = Field(
        default=None,
        description="KV bytes per token from this model preset (`litehit models`; case-insensitive); an "
        "instance of the group may then leave out its location specs",
    )
    kv_dtype: Text | None = Field(default=None, description="the model's KV element type: bf16 (default), fp16, fp8")
    kv_bytes_per_token: Int64 | None = Field(
        default=None,
        description="KV-cache bytes of one token (with model: must agree); block bytes = this x block_size",
    )

    @property
    def token_kv_bytes(self) -> int | None:
        """KV bytes of one token from model (and kv_dtype) or kv_bytes_per_token; None when the
        group gives neither (or a model name that check_replay_spec rejects)."""
        if self.model is not None:
            preset = model_named(self.model)
            dtype = self.kv_dtype or DEFAULT_KV_DTYPE
            return preset.bytes_per_token(dtype) if preset and dtype in KV_DTYPE_BYTES else None
        return self.kv_bytes_per_token


class LocationSpecInfo(_Section):
    name: Text = Field(default="", description="the spec's name, unique in the instance")
    size: Int64 = Field(default=0, description="KV-cache bytes of one block under this spec (e.g. one tensor shard)")


class LocationSpecGroup(_Section):
    name: Text = Field(default="", description="the spec group's name, unique in the instance")
    spec_names: list[Text] = Field(
        default_factory=list,
        max_length=SPECS_MAX,
        description="the specs whose sizes add up to the group's bytes per block",
    )


class StateInfo(_Section):
    full_location_spec_group_name: Text = Field(
        default="", description="the spec group of full attention: its sizes add up to the block bytes"
    )
    linear_location_spec_group_name: Text = Field(
        default="", description="the spec group of linear attention (optional; must differ from the full group)"
    )


class InstanceInfo(_Section):
    instance_group_name: Name = Field(
        default="", description="the group it belongs to (its capacities, TTL, prefix hashing)"
    )
    instance_id: Name = Field(default="", description="the instance's id: one lane of a replay; online, its URL id")
    block_size: Int32 = Field(default=0, description="tokens per block, a multiple of the trace's block_size")
    location_spec_infos: list[LocationSpecInfo] = Field(
        default_factory=list, max_length=SPECS_MAX, description="the KV-cache layout: bytes per block of each spec"
    )
    location_spec_groups: list[LocationSpecGroup] = Field(
        default_factory=list, max_length=SPECS_MAX, description="named sets of specs"
    )
    linear_step: Int32 = Field(
        default=0,
        description="tokens between saved linear-attention (Mamba) states, a multiple of block_size; 0: full "
        "attention only. A hybrid lane (> 0) needs optimizer_state_info.linear_location_spec_group_name",
    )
    optimizer_state_info: StateInfo = Field(default_factory=StateInfo, description="which spec group is full attention")

    @property
    def block_bytes(self) -> int:
        """size_full_only: the sizes of the specs in the full location-spec group."""
        sizes = {s.name: s.size for s in self.location_spec_infos}
        full = self.optimizer_state_info.full_location_spec_group_name
        group = next(g for g in self.location_spec_groups if g.name == full)
        return sum(sizes[name] for name in group.spec_names)

    @property
    def linear_charge_bytes(self) -> int:
        """The bytes of one saved linear-attention state: the sizes of the specs in the linear
        location-spec group (0 for a Full-only instance, linear_step 0)."""
        linear = self.optimizer_state_info.linear_location_spec_group_name
        if self.linear_step == 0 or not linear:
            return 0
        sizes = {s.name: s.size for s in self.location_spec_infos}
        group = next(g for g in self.location_spec_groups if g.name == linear)
        return sum(sizes[name] for name in group.spec_names)

    @property
    def linear_step_blocks(self) -> int:
        """linear_step in the lane's blocks (0 for a Full-only instance)."""
        return self.linear_step // self.block_size if self.linear_step > 0 and self.block_size > 0 else 0


class ReplaySpec(_Section):
    trace_file_path: Text = Field(default="", description="the trace file")
    output_result_path: Text = Field(default="", description="where the facts CSV is written")
    instance_groups: list[ReplayInstanceGroup] = Field(
        default_factory=list,
        max_length=GROUPS_MAX,
        description="the groups of instances (capacities, TTL, prefix hashing)",
    )
    instances: list[InstanceInfo] = Field(
        default_factory=list, max_length=LANES_MAX, description="the instances: one lane each"
    )
    override_instance_id: Name = Field(
        default="", description="send every request to this instance (not with fanout_all_instances)"
    )
    block_size: UInt64 = Field(default=256, description="tokens per block of the trace (its granularity)")
    fanout_all_instances: StrictBool = Field(default=False, description="send every request to every instance")
    pipeline_worker_count: Int32 = Field(default=1, description="parse threads of the CLI, clamped to [1, 64]")
    trace_format: TraceFormat | None = Field(
        default=None,
        description="standard, mooncake, qwen_bailian or publisher_log (null: detected from the first row)",
    )
    facts_format: Literal["standard", "extended"] = Field(
        default="standard",
        description="standard: the 7 original columns; extended: plus complete_blocks and cut_reason",
    )
    kv_bytes_assumed: StrictBool = Field(
        default=False,
        description="set by the shorthand when no KV bytes were given (2 KiB/token assumed): the job's outputs "
        "say so in one line",
    )

    @property
    def workers(self) -> int:
        """pipeline_worker_count clamped to [1, 64] (the original clamps values < 1 to 1)."""
        return min(max(self.pipeline_worker_count, 1), MAX_PIPELINE_WORKERS)

    def group_of(self, instance: InstanceInfo) -> ReplayInstanceGroup:
        return next(g for g in self.instance_groups if g.name == instance.instance_group_name)

    def block_bytes_of(self, instance: InstanceInfo) -> int:
        """The KV bytes of one block of the instance's lane: its location specs' (size_full_only),
        or its group's KV bytes per token x its block_size when it gives no specs."""
        per_token = self.group_of(instance).token_kv_bytes
        if per_token is not None and _gives_no_specs(instance):
            return per_token * instance.block_size
        return instance.block_bytes

    def unknown_fields(self) -> list[str]:
        """Paths of config fields this spec does not know (kept, but ignored)."""
        return [issue.path for issue in self.unknown_field_issues()]

    def unknown_field_issues(self) -> list[ConfigIssue]:
        """Each config field this spec does not know, as an issue naming it, its value and, when
        a known field of its section is spelled alike, that field ("modle": did you mean model?).
        A valid config keeps them (warnings); an invalid one lists them first: a typo is the
        likeliest cause of the errors after it."""
        found: list[ConfigIssue] = []

        def walk(model: BaseModel, path: str) -> None:
            known = list(type(model).model_fields)
            for k, value in (model.model_extra or {}).items():
                alike = difflib.get_close_matches(k, known, n=1, cutoff=0.75)
                hint = f" (did you mean {alike[0]}?)" if alike else ""
                found.append(ConfigIssue(f"{path}{k}", value, f"unknown field{hint}: a replay does not use it"))
            for name in type(model).model_fields:
                value = getattr(model, name)
                if isinstance(value, BaseModel):
                    walk(value, f"{path}{name}.")
                elif isinstance(value, list):
                    for i, item in enumerate(value):
                        if isinstance(item, BaseModel):
                            walk(item, f"{path}{name}[{i}].")

        walk(self, "")
        return found


def _gives_no_specs(inst: InstanceInfo) -> bool:
    state = inst.optimizer_state_info
    return not (
        inst.location_spec_infos
        or inst.location_spec_groups
        or state.full_location_spec_group_name
        or state.linear_location_spec_group_name
    )


def _loc_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def error_subject(error: ErrorDetails) -> tuple[tuple[int | str, ...], Any]:
    """Where a pydantic error is and the value it is about. An unknown field that is not plain
    JSON is reported by its own path, not by its section's (whose input holds the whole section)."""
    if error["type"] == PLAIN_JSON:
        ctx = error.get("ctx") or {}
        return (*error["loc"], ctx["field"]), ctx["value"]
    return error["loc"], error.get("input")


def config_error(exc: ValidationError) -> ConfigError:
    """A pydantic validation failure as a ConfigError naming each field path and value."""
    issues = []
    for e in exc.errors():
        loc, value = error_subject(e)
        issues.append(ConfigIssue(_loc_path(loc), value, e["msg"].removeprefix("Value error, ")))
    return ConfigError(issues)


def parse_replay_spec(data: Any) -> ReplaySpec:
    """Validates a config mapping (structure, types, then the original semantic rules)."""
    if not isinstance(data, dict):
        raise ConfigError([ConfigIssue("", type(data).__name__, "the config must be a JSON object")])
    try:
        spec = ReplaySpec.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc) from None
    issues = check_replay_spec(spec)
    if issues:
        raise ConfigError(spec.unknown_field_issues() + issues)
    return spec


def load_replay_config(path: str | Path) -> ReplaySpec:
    """Reads and validates an original offline config JSON file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue("", str(path), f"Failed to parse LiteHit config file: {exc}")]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [ConfigIssue("", str(path), f"Failed to parse LiteHit config file: {exc.msg} at line {exc.lineno}")]
        ) from None
    except RecursionError:
        raise ConfigError(
            [ConfigIssue("", str(path), "Failed to parse LiteHit config file: nesting too deep")]
        ) from None
    return parse_replay_spec(data)


def routing_issues(spec: ReplaySpec, fmt: str) -> list[ConfigIssue]:
    """Rows of a format without instance ids (litehit.traces.format_table) go to the only lane, or
    follow override_instance_id or fanout_all_instances: several lanes without either cannot be
    routed (known as soon as the format is, before any row is read)."""
    from litehit.traces.format_table import INSTANCELESS

    if spec.fanout_all_instances or spec.override_instance_id or fmt not in INSTANCELESS:
        return []
    if len(spec.instances) == 1:
        return []
    return [
        ConfigIssue(
            "instances",
            [inst.instance_id for inst in spec.instances],
            f"{fmt} rows carry no instance id: with {len(spec.instances)} instances set "
            "override_instance_id or fanout_all_instances",
        )
    ]


def check_replay_spec(spec: ReplaySpec) -> list[ConfigIssue]:
    """The original runner's validation, in its order; an empty list means valid."""
    issues: list[ConfigIssue] = []

    def fail(path: str, value: Any, message: str) -> None:
        issues.append(ConfigIssue(path, value, message))

    # Config load.
    if not spec.trace_file_path:
        fail("trace_file_path", spec.trace_file_path, "lite_hit config: trace_file_path must not be empty")
    if not spec.output_result_path:
        fail(
            "output_result_path",
            spec.output_result_path,
            "lite_hit config: output_result_path must not be empty",
        )
    if not spec.instance_groups:
        fail("instance_groups", [], "lite_hit config: instance_groups must not be empty")
    if not spec.instances:
        fail("instances", [], "lite_hit config: instances must not be empty")
    if spec.fanout_all_instances and spec.override_instance_id:
        fail(
            "fanout_all_instances",
            True,
            "lite_hit config: fanout_all_instances and override_instance_id are mutually exclusive",
        )
    # 1. Groups into the registry.
    seen_groups: set[str] = set()
    for i, g in enumerate(spec.instance_groups):
        issues += group_issues(g, f"instance_groups[{i}]", seen_groups)
        issues += kv_bytes_issues(g, f"instance_groups[{i}]")
        seen_groups.add(g.name)
    # 2. Trace granularity.
    if spec.block_size <= 0:
        fail("block_size", spec.block_size, "lite_hit config: block_size (trace granularity) must be positive")
    # 3. Instances, in config order.
    groups = {g.name for g in spec.instance_groups}
    seen_ids: set[str] = set()
    for i, inst in enumerate(spec.instances):
        where = f"instances[{i}]"
        iid = inst.instance_id
        if inst.linear_step > 0 and spec.facts_format == "extended":
            fail(
                "facts_format",
                spec.facts_format,
                f"instance[{iid}] is a hybrid lane (linear_step {inst.linear_step}): extended facts are Full-only",
            )
        if inst.block_size > 0 and spec.block_size > 0 and inst.block_size % spec.block_size != 0:
            fail(
                f"{where}.block_size",
                inst.block_size,
                f"instance[{iid}] block_size={inst.block_size} is not a multiple of the trace "
                f"block_size={spec.block_size} (re-blocking is coarsening only)",
            )
        group = next((g for g in spec.instance_groups if g.name == inst.instance_group_name), None)
        kv_given = group is not None and any(
            v is not None for v in (group.model, group.kv_bytes_per_token, group.kv_dtype)
        )
        per_token = group.token_kv_bytes if group is not None and not kv_bytes_issues(group, "") else None
        if kv_given and _gives_no_specs(inst):  # a group's bad KV fields are reported once, above
            issues += instance_issues(inst, groups, where, specs_given=False)
            if inst.linear_step > 0:  # the group's KV bytes are the Full blocks' only: no state size
                fail(
                    f"{where}.location_spec_infos",
                    [],
                    f"instance[{iid}] is a hybrid lane (linear_step {inst.linear_step}): give its location specs "
                    "with a linear group for the state's bytes (the group's KV bytes size the Full blocks only)",
                )
            if per_token is not None and per_token * inst.block_size > INT64[1]:
                fail(f"{where}.block_size", inst.block_size, f"instance[{iid}]: block bytes overflow int64")
        else:
            found = instance_issues(inst, groups, where)
            issues += found
            if per_token is not None and not found and inst.block_size > 0:
                expected = per_token * inst.block_size
                if inst.block_bytes != expected:
                    fail(
                        f"{where}.location_spec_infos",
                        [s.model_dump() for s in inst.location_spec_infos],
                        f"instance[{iid}]: its full spec group holds {inst.block_bytes} bytes per block, its group "
                        f"{inst.instance_group_name}'s KV bytes give {per_token} B/token x block_size "
                        f"{inst.block_size} = {expected}: leave the location specs out, or make them agree",
                    )
        hybrid = None if group is None or group.model is None else model_named(group.model)
        if hybrid is not None and hybrid.is_hybrid and inst.linear_step == 0:
            fail(
                f"{where}.linear_step",
                inst.linear_step,
                f"instance[{iid}]: model {hybrid.name} is hybrid ({hybrid.linear_layers} linear-attention layers "
                "beside its full-attention ones): give it linear_step and a linear location-spec group, or use "
                "the shorthand's model, which sets both",
            )
        if iid and iid in seen_ids:
            fail(f"{where}.instance_id", iid, f"duplicate instance_id[{iid}] in config")
        seen_ids.add(iid)
    # 4. Router.
    if spec.override_instance_id and spec.override_instance_id not in seen_ids:
        fail(
            "override_instance_id",
            spec.override_instance_id,
            f"override_instance_id[{spec.override_instance_id}] has no matching configured instance",
        )
    return issues


def group_issues(g: InstanceGroup, where: str, existing: AbstractSet[str] = frozenset()) -> list[ConfigIssue]:
    """CreateInstanceGroup's rules (shared by the replay config and online registration)."""
    out: list[ConfigIssue] = []
    if g.name in existing:
        out.append(ConfigIssue(f"{where}.name", g.name, f"CreateInstanceGroup[{g.name}] failed: duplicate group name"))
    for j, cap in enumerate(g.capacity_gb):
        if not math.isfinite(cap) or cap < 0:
            out.append(ConfigIssue(f"{where}.capacity_gb[{j}]", cap, "capacity_gb must be finite and not negative"))
    if g.eviction_policy != "lru":
        out.append(ConfigIssue(f"{where}.eviction_policy", g.eviction_policy, 'eviction_policy must be "lru"'))
    if g.shared_group_quota:
        out.append(ConfigIssue(f"{where}.shared_group_quota", True, "shared_group_quota is not supported"))
    if g.ttl_seconds < 0:
        out.append(ConfigIssue(f"{where}.ttl_seconds", g.ttl_seconds, "ttl_seconds must not be negative"))
    elif g.ttl_seconds > (2**63 - 1) // 1_000_000_000:
        out.append(ConfigIssue(f"{where}.ttl_seconds", g.ttl_seconds, "ttl_seconds overflows int64 nanoseconds"))
    return out


def kv_bytes_issues(g: ReplayInstanceGroup, where: str) -> list[ConfigIssue]:
    """The KV-bytes fields of a replay instance group: a known model, a known kv_dtype (with a
    model only), positive kv_bytes_per_token, and model and kv_bytes_per_token agreeing."""
    out: list[ConfigIssue] = []
    preset = None if g.model is None else model_named(g.model)
    if g.model is not None and preset is None:
        out.append(ConfigIssue(f"{where}.model", g.model, "unknown model (`litehit models` lists them)"))
    if g.kv_dtype is not None and g.model is None:
        out.append(ConfigIssue(f"{where}.kv_dtype", g.kv_dtype, "applies to model only"))
    elif g.kv_dtype is not None and g.kv_dtype not in KV_DTYPE_BYTES:
        out.append(ConfigIssue(f"{where}.kv_dtype", g.kv_dtype, f"expected one of {', '.join(KV_DTYPE_BYTES)}"))
    if g.kv_bytes_per_token is not None and g.kv_bytes_per_token < 1:
        out.append(ConfigIssue(f"{where}.kv_bytes_per_token", g.kv_bytes_per_token, "must be a positive integer"))
    elif g.kv_bytes_per_token is not None and preset is not None and not out:
        dtype = g.kv_dtype or DEFAULT_KV_DTYPE
        from_model = preset.bytes_per_token(dtype)
        if from_model != g.kv_bytes_per_token:
            out.append(
                ConfigIssue(
                    f"{where}.kv_bytes_per_token",
                    g.kv_bytes_per_token,
                    f"disagrees with model {preset.name} ({from_model} B/token in {dtype}): give one, or the same value",
                )
            )
    return out


def instance_issues(inst: InstanceInfo, groups: set[str], where: str, *, specs_given: bool = True) -> list[ConfigIssue]:
    """RegisterInstance's rules (empty id, unknown group, spec groups, full group, linear_step).
    specs_given=False: the instance's block bytes come from its group's KV bytes per token, so
    its (absent) location specs are not required."""
    return [
        ConfigIssue(f"{where}{path}", value, f"RegisterInstance[{inst.instance_id}] failed: {message}")
        for path, value, message in _registration_issues(inst, groups)
        if specs_given or not path.startswith((".location_spec", ".optimizer_state_info"))
    ]


def _registration_issues(inst: InstanceInfo, groups: set[str]) -> list[tuple[str, Any, str]]:
    out: list[tuple[str, Any, str]] = []
    if not inst.instance_id:
        out.append((".instance_id", inst.instance_id, "instance_id must not be empty"))
    if inst.block_size <= 0:
        out.append((".block_size", inst.block_size, "block_size must be positive"))
    if inst.instance_group_name not in groups:
        out.append((".instance_group_name", inst.instance_group_name, "no instance group of that name"))
    if inst.linear_step < 0:
        out.append((".linear_step", inst.linear_step, "linear_step must not be negative"))
    elif inst.linear_step > 0 and inst.block_size > 0 and inst.linear_step % inst.block_size != 0:
        out.append(
            (
                ".linear_step",
                inst.linear_step,
                f"linear_step={inst.linear_step} tokens is not a multiple of block_size={inst.block_size} "
                f"for instance[{inst.instance_id}]",
            )
        )
    if not inst.location_spec_infos:
        out.append((".location_spec_infos", [], "location_spec_infos must not be empty"))
    spec_names: set[str] = set()
    for j, s in enumerate(inst.location_spec_infos):
        if not s.name:
            out.append((f".location_spec_infos[{j}].name", s.name, "spec name must not be empty"))
        elif s.name in spec_names:
            out.append((f".location_spec_infos[{j}].name", s.name, "duplicate spec name"))
        spec_names.add(s.name)
        if s.size <= 0:
            out.append((f".location_spec_infos[{j}].size", s.size, "spec size must be positive"))
    group_names: set[str] = set()
    for j, g in enumerate(inst.location_spec_groups):
        if not g.name:
            out.append((f".location_spec_groups[{j}].name", g.name, "spec group name must not be empty"))
        elif g.name in group_names:
            out.append((f".location_spec_groups[{j}].name", g.name, "duplicate spec group name"))
        group_names.add(g.name)
        in_group: set[str] = set()
        for k, name in enumerate(g.spec_names):
            if not name:
                out.append((f".location_spec_groups[{j}].spec_names[{k}]", name, "spec name must not be empty"))
            elif name in in_group:
                out.append((f".location_spec_groups[{j}].spec_names[{k}]", name, "duplicate spec name in group"))
            in_group.add(name)
    state = inst.optimizer_state_info
    full, linear = state.full_location_spec_group_name, state.linear_location_spec_group_name
    if not full:
        out.append((".optimizer_state_info.full_location_spec_group_name", full, "the full spec group is required"))
    elif full not in group_names:
        out.append(
            (
                ".optimizer_state_info.full_location_spec_group_name",
                full,
                "no location spec group of that name",
            )
        )
    else:
        j, group = next((j, g) for j, g in enumerate(inst.location_spec_groups) if g.name == full)
        if not group.spec_names:
            out.append((f".location_spec_groups[{j}].spec_names", [], "the full spec group names no spec"))
        for name in group.spec_names:
            if name and name not in spec_names:
                out.append(
                    (
                        ".optimizer_state_info.full_location_spec_group_name",
                        full,
                        f"spec {name!r} is not defined",
                    )
                )
    if inst.linear_step == 0 and linear:
        out.append(
            (
                ".optimizer_state_info.linear_location_spec_group_name",
                linear,
                f"full-attention instance[{inst.instance_id}] must not configure a linear/Mamba spec group",
            )
        )
    elif inst.linear_step > 0 and not linear:
        out.append(
            (
                ".optimizer_state_info.linear_location_spec_group_name",
                linear,
                f"linear instance[{inst.instance_id}] requires a non-empty Mamba spec group",
            )
        )
    if linear:
        if linear == full:
            out.append(
                (
                    ".optimizer_state_info.linear_location_spec_group_name",
                    linear,
                    "must differ from the full group",
                )
            )
        elif linear not in group_names:
            out.append(
                (
                    ".optimizer_state_info.linear_location_spec_group_name",
                    linear,
                    "no location spec group of that name",
                )
            )
        elif inst.linear_step > 0:
            j, group = next((j, g) for j, g in enumerate(inst.location_spec_groups) if g.name == linear)
            sizes = {spec.name: spec.size for spec in inst.location_spec_infos}
            missing = [name for name in group.spec_names if name and name not in sizes]
            if missing:
                out.append(
                    (
                        ".optimizer_state_info.linear_location_spec_group_name",
                        linear,
                        f"spec {missing[0]!r} is not defined",
                    )
                )
            elif sum(sizes[name] for name in group.spec_names if name) <= 0:
                out.append(
                    (f".location_spec_groups[{j}].spec_names", group.spec_names, "the linear spec group holds no bytes")
                )
    return out
