"""Request and response bodies of the HTTP API (pydantic). Replay requests reuse the replay
spec of the domain (the original offline config) so the service accepts existing configs. The
bodies and answers of each job kind come from the kind's declaration (litehit.jobs): the request
of a kind over a trace is ReplayCreate plus its options, its answer ``public_model(kind)``."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from litehit.jobs.base import JobKind, TraceKind, UTCDateTime
from litehit.jobs.facts_kind import FactsKind
from litehit.jobs.kinds import Kind
from litehit.jobs.views import public_model
from litehit.limits import LANES_MAX
from litehit.spec import ReplaySpec, Text

T = TypeVar("T")


class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description="path of the offending field")
    msg: str = Field(description="what is wrong there")
    input: Any = Field(default=None, description='the offending value (deep values cut to "...")')


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. not_found, validation_error, conflict")
    message: str = Field(description="human-readable summary")
    details: list[ErrorDetail] = Field(
        default_factory=list, description="one entry per offending field (validation errors)"
    )


class ErrorResponse(BaseModel):
    error: ErrorBody = Field(description="what went wrong")


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(description="this page's items")
    total: int = Field(description="items in all pages")
    limit: int = Field(description="the page size asked for")
    offset: int = Field(description="items skipped before this page")
    next_offset: int | None = Field(description="the offset of the next page (null: this is the last)")


class TracePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="the trace's id: trace_id of a job")
    name: str = Field(description="the file name given at upload")
    path: str = Field(description="relative to the storage root; usable as trace_file_path")
    size_bytes: int = Field(description="bytes uploaded (compressed, when compressed)")
    sha256: str = Field(description="SHA-256 of the uploaded bytes, hex")
    compression: str = Field(description="none, gzip or zstd")
    trace_format: str = Field(
        description="standard, mooncake, qwen_bailian or publisher_log (sniffed from the first row)"
    )
    created_at: UTCDateTime = Field(description="when the upload finished (UTC)")


class ReplayCreate(ReplaySpec):
    """The original offline config, or the shorthand (as `litehit replay TRACE --block-sizes ...`):
    a trace plus any of ``block_sizes``, ``ttl_seconds``, ``model``/``kv_dtype``,
    ``kv_bytes_per_token``, ``block_bytes`` and ``prefix_hash``, standing for one lane per block
    size x TTL (then without ``instances``/``instance_groups``; ``block_size`` is the trace's block
    and ``trace_format`` is detected when not given). The trace is ``trace_id`` (an upload) or
    ``trace_file_path`` inside the storage root; the service publishes the facts under the job,
    so ``output_result_path`` is ignored."""

    trace_id: Text | None = Field(
        default=None, description="an uploaded trace (POST /v1/traces); or give trace_file_path"
    )
    trace_file_path: Text = Field(
        default="", description="a trace file inside the storage root (relative to it); or give trace_id"
    )
    output_result_path: str = Field(default="", description="ignored: the service publishes the facts under the job")
    block_sizes: list[Annotated[int, Field(ge=1, le=2**31)]] | None = Field(
        default=None,
        min_length=1,
        max_length=LANES_MAX,
        description="shorthand: analysis block sizes, multiples of block_size",
    )
    ttl_seconds: list[Annotated[int, Field(ge=0, le=2**40)]] | None = Field(
        default=None, min_length=1, max_length=LANES_MAX, description="shorthand: one lane group per TTL (0 = pure LRU)"
    )
    model: Text | None = Field(
        default=None,
        description="shorthand: KV bytes per token from this model preset; a hybrid preset also gives the "
        "state bytes (and linear_step defaults to the block sizes' least common multiple)",
    )
    kv_dtype: Literal["bf16", "fp16", "fp8"] | None = Field(default=None, description="shorthand: the model's KV type")
    kv_bytes_per_token: Annotated[int, Field(ge=1, le=2**40)] | None = Field(
        default=None, description="shorthand: KV-cache bytes of one token"
    )
    block_bytes: Annotated[int, Field(ge=1, le=2**50)] | None = Field(
        default=None, description="shorthand: KV-cache bytes of one trace block"
    )
    prefix_hash: bool | None = Field(default=None, description="shorthand: chain block hashes into prefix keys")
    linear_step: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = Field(
        default=None,
        description="shorthand, hybrid models: tokens between saved linear-attention states (with "
        "linear_state_bytes, or a hybrid model preset)",
    )
    linear_state_bytes: Annotated[int, Field(ge=1, le=2**50)] | None = Field(
        default=None, description="shorthand, hybrid models: bytes of one saved linear-attention state"
    )


def create_model_of(kind: JobKind[Any]) -> type[BaseModel]:
    """The request body of a kind: a kind over facts has its own model; for a kind over a trace, ReplayCreate plus
    its options under its options field (made from the kind's declaration)."""
    if isinstance(kind, FactsKind):
        return kind.create_model
    assert isinstance(kind, TraceKind)
    name = {Kind.REPLAY: "ReplayCreate"}.get(kind.kind, f"{kind.public_name.removesuffix('Public')}Create")
    if kind.options_field is None:
        if kind.kind == Kind.REPLAY:
            return ReplayCreate
        doc = (
            "A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the storage "
            "root)" + ("; lanes with a TTL are rejected." if not kind.ttl_lanes else ".")
        )
        model: type[BaseModel] = create_model(name, __base__=ReplayCreate, __doc__=doc)
        return model
    doc = (
        "A replay config (as for /v1/replays: the trace by ``trace_id`` or ``trace_file_path`` in the storage root"
        + ("; lanes with a TTL are rejected" if not kind.ttl_lanes else "")
        + f") and what the {kind.what} asks for under ``{kind.options_field}``."
    )
    fields: dict[str, Any] = {kind.options_field: (kind.options_model, Field(description=kind.options_description))}
    model = create_model(name, __base__=ReplayCreate, __doc__=doc, **fields)
    return model


__all__ = ["ErrorResponse", "Page", "ReplayCreate", "TracePublic", "create_model_of", "public_model"]
