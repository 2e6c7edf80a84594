"""What a tier split and a plan are asked for, as typed models: the CLI builds them from its flags,
the HTTP API validates request bodies with them, and jobs store them. No engine imports.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from litehit.capacity import CapacitySlot
from litehit.tiers.config import TIERS_MAX, TierError, TierMode, check_tier_names, parse_capacity, parse_range
from litehit.tiers.hardware import resolve_gpu, resolve_model, spare_hbm_bytes, tier_link

__all__ = ["PlanOptions", "PlanTier", "PrefillOptions", "Target", "Tier", "TiersOptions", "TtftStat"]

SPARE = "spare"
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Tier(BaseModel):
    """One tier of a configuration; the first is the GPU's memory (HBM)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="hbm, dram, ssd, ... (a letter, then letters, digits, _ or -)")
    capacity: str | float = Field(
        description="per instance: GiB, or a number with a unit (30GiB, 512GiB, 20000blocks, 1Mtokens), inf "
        "(the last tier only), or spare (the first tier only: the GPU memory the model's weights leave)"
    )
    link: str | None = Field(default=None, description="how a lower tier is read: a link preset (pcie-gen5, nvme, ...)")
    bandwidth_bytes_per_s: Positive | None = Field(default=None, description="overrides the link's bandwidth")
    latency_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        default=None, description="overrides the link's per-request latency"
    )


class PlanTier(Tier):
    capacity: str | float = Field(
        description="fixed (30GiB, spare) or a range searched, MIN..MAX (0..2TiB, 0..inf for the last tier)"
    )
    price_per_gib_hour: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(
        default=0.0, description="what one GiB of this tier costs per hour (0: already paid for)"
    )


class PrefillOptions(BaseModel):
    """The prefill model's presets and overrides (litehit.tiers.prefill)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="a model preset (litehit models)")
    gpu: str = Field(description="H100-SXM, H200, B200, A100-80GB, L40S or MI300X")
    mfu: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        default=0.4, description="the share of the GPU's dense peak prefill reaches"
    )
    overlap: bool = Field(default=False, description="loads pipelined layer by layer: max(compute, loads)")
    active_params: Positive | None = Field(default=None, description="overrides the model's active parameters")
    layers: Positive | None = Field(default=None, description="overrides the model's layers")
    heads: Positive | None = Field(default=None, description="overrides the model's query heads")
    head_dim: Positive | None = Field(default=None, description="overrides the model's head dimension")
    peak_flops: Positive | None = Field(default=None, description="overrides the GPU's dense BF16 FLOP/s")
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        default=0.9, description="share of the GPU's memory the server may use (for a first tier of spare)"
    )

    @model_validator(mode="after")
    def _known(self) -> PrefillOptions:
        resolve_model(self.model, "prefill.model")
        resolve_gpu(self.gpu, "prefill.gpu")
        return self

    def overrides(self) -> dict[str, float]:
        names = ("active_params", "layers", "heads", "head_dim", "peak_flops")
        return {n: float(getattr(self, n)) for n in names if getattr(self, n) is not None}


def _check_inclusive(tiers: list[Tier], slots: list[CapacitySlot | None]) -> None:
    """Inclusive capacities of one unit family (bytes, blocks or tokens) must not decrease; across
    families the lane's block decides, when the facts are read."""
    for i in range(1, len(tiers)):
        low, high = slots[i - 1], slots[i]
        if low is None or high is None or low.per_lane != high.per_lane or (low.per_lane and low.unit != high.unit):
            continue
        if (low.infinite and not high.infinite) or (
            not high.infinite and not low.infinite and _size(high) < _size(low)
        ):
            raise TierError(
                f"tiers[{i}].capacity",
                f"inclusive tiers need non-decreasing capacities: {tiers[i].name} ({high.label}) is smaller than "
                f"{tiers[i - 1].name} ({low.label})",
            )


def _size(slot: CapacitySlot) -> int:
    return slot.count if slot.per_lane else slot.capacity_bytes


def _check_tiers(
    tiers: list[Tier], *, ranged: bool, prefill: PrefillOptions | None, mode: TierMode = TierMode.EXCLUSIVE
) -> None:
    check_tier_names([t.name for t in tiers], "tiers")
    lows: list[CapacitySlot | None] = []
    for i, tier in enumerate(tiers):
        where = f"tiers[{i}].capacity"
        if isinstance(tier.capacity, str) and tier.capacity.strip().lower() == SPARE:
            if i != 0:
                raise TierError(where, "spare is the first tier's capacity (the GPU memory the weights leave)")
            if prefill is None:
                raise TierError(where, "spare needs the prefill model: a model and a GPU")
            spare = spare_hbm_bytes(prefill.model, prefill.gpu, prefill.gpu_memory_utilization, where)
            lows.append(parse_capacity(f"{spare}B", where))
            continue
        if ranged:
            r = parse_range(tier.capacity, where)
            slots = [r.low, r.high]
        else:
            slots = [parse_capacity(tier.capacity, where)]
        lows.append(slots[0])
        if any(s.infinite for s in slots) and i != len(tiers) - 1:
            raise TierError(where, "only the last tier can be infinite")
        if i == 0 and (tier.link or tier.bandwidth_bytes_per_s or tier.latency_s is not None):
            raise TierError(f"tiers[{i}].link", "the first tier is the GPU's memory: nothing is loaded from it")
        if i > 0 and (prefill is not None or tier.link):
            tier_link(tier.name, tier.link, tier.bandwidth_bytes_per_s, tier.latency_s, f"tiers[{i}].link")
    if mode is TierMode.INCLUSIVE and not ranged:
        _check_inclusive(tiers, lows)


class TiersOptions(BaseModel):
    """A tier split: one configuration of tiers."""

    model_config = ConfigDict(extra="forbid")

    tiers: list[Tier] = Field(min_length=1, max_length=TIERS_MAX, description="T1 (HBM) first")
    mode: TierMode = Field(default=TierMode.EXCLUSIVE, description="exclusive (demote/promote) or inclusive")
    prefill: PrefillOptions | None = Field(default=None, description="estimate prefill times with this model")

    @model_validator(mode="after")
    def _valid(self) -> TiersOptions:
        _check_tiers(list(self.tiers), ranged=False, prefill=self.prefill, mode=self.mode)
        return self


class Target(BaseModel):
    """What the plan must reach: exactly one of the three."""

    model_config = ConfigDict(extra="forbid")

    hit_rate: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = Field(
        default=None, description="hit tokens / input tokens"
    )
    prefill_saving: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] | None = Field(
        default=None, description="share of prefill GPU-seconds saved (needs prefill)"
    )
    ttft_s: Positive | None = Field(default=None, description="the prefill estimate's statistic at most this")

    @model_validator(mode="after")
    def _one(self) -> Target:
        given = [n for n in ("hit_rate", "prefill_saving", "ttft_s") if getattr(self, n) is not None]
        if len(given) > 1:
            raise TierError("target", f"give one target, not {' and '.join(given)}")
        return self

    @property
    def given(self) -> bool:
        return any(getattr(self, n) is not None for n in ("hit_rate", "prefill_saving", "ttft_s"))


TtftStat = Literal["mean", "p90"]


class PlanOptions(BaseModel):
    """A plan: tiers fixed or ranged with prices, a target, and the frontier."""

    model_config = ConfigDict(extra="forbid")

    tiers: list[PlanTier] = Field(min_length=1, max_length=TIERS_MAX, description="T1 (HBM) first")
    mode: TierMode = Field(default=TierMode.EXCLUSIVE, description="exclusive (demote/promote) or inclusive")
    prefill: PrefillOptions | None = Field(default=None, description="estimate prefill times with this model")
    target: Target = Field(default_factory=Target, description="the cheapest configuration reaching it is best")
    ttft_stat: TtftStat = Field(default="mean", description="the statistic a ttft target bounds")
    gpu_price_per_hour: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        default=None, description="what one GPU-hour costs: the value of the prefill time saved"
    )

    @model_validator(mode="after")
    def _valid(self) -> PlanOptions:
        _check_tiers(list(self.tiers), ranged=True, prefill=self.prefill)
        if (self.target.prefill_saving is not None or self.target.ttft_s is not None) and self.prefill is None:
            raise TierError("target", "a time target needs the prefill model: a model and a GPU")
        if self.gpu_price_per_hour is not None and self.prefill is None:
            raise TierError(
                "gpu_price_per_hour", "the value of prefill time needs the prefill model: a model and a GPU"
            )
        return self
