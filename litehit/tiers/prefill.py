"""The prefill-time model: an estimate that ranks tier configurations, never a measured latency.

Per request with L input tokens, P cached tokens (served by any tier) and T = L - P new tokens::

    FLOPs     = 2 x active_params x T + 4 x layers x heads x head_dim x (T x P + T x (T + 1) / 2)
    compute   = FLOPs / (peak dense FLOP/s x mfu)
    load_i    = hit_blocks_i x block_bytes / bandwidth_i + (latency_i if tier i served a block)
                for every tier i below the first (the first is the GPU's own memory)
    estimate  = compute + sum(load_i)            (default)
              = max(compute, sum(load_i))        (overlap: loads pipelined layer by layer)

The first term is the weights' multiply-adds for the new tokens; the second the attention of the
new tokens over the cached ones and over each other (causal). Left out: queueing, batching with
other requests, decode, kernel efficiency beyond the one mfu factor, the time to write new blocks
to lower tiers, link contention between requests, and tensor or pipeline parallelism (one GPU
per instance), and for a hybrid model (``layers`` are its full-attention layers) the recurrent work
of its linear layers. Every constant is printed with the result (``constants``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from litehit.quantiles import decimal
from litehit.tiers.config import TierError
from litehit.tiers.hardware import TierLink, resolve_gpu, resolve_model, tier_link

__all__ = [
    "DEFAULT_MFU",
    "FORMULA",
    "PrefillModel",
    "PrefillStats",
    "prefill_model",
    "prefill_stats",
]

DEFAULT_MFU = 0.4
FORMULA = (
    "FLOPs = 2 x active_params x T + 4 x layers x heads x head_dim x (T x P + T x (T + 1) / 2), "
    "T = L - P new tokens, P cached tokens; compute = FLOPs / (peak_flops x mfu); "
    "load_i = hit_blocks_i x block_bytes / bandwidth_i + latency_i (if tier i served a block); "
    "estimate = compute + sum(load_i), or max(compute, sum(load_i)) with overlap"
)
Float64Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PrefillModel:
    model: str
    gpu: str
    active_params: int
    layers: int
    heads: int
    head_dim: int
    peak_flops: float
    mfu: float
    overlap: bool
    links: tuple[TierLink | None, ...]  # per tier; None for the first

    @property
    def flops_per_second(self) -> float:
        return self.peak_flops * self.mfu

    def constants(self, tier_names: Sequence[str]) -> dict[str, Any]:
        return {
            "formula": FORMULA,
            "model": self.model,
            "active_params": self.active_params,
            "layers": self.layers,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "gpu": self.gpu,
            "peak_flops": self.peak_flops,
            "mfu": self.mfu,
            "overlap": self.overlap,
            "links": {
                name: link.as_dict() for name, link in zip(tier_names, self.links, strict=True) if link is not None
            },
        }

    def compute_s(self, new: Float64Array, cached: Float64Array) -> Float64Array:
        """Compute seconds of requests with `new` new and `cached` cached tokens."""
        attention = 4.0 * self.layers * self.heads * self.head_dim * (new * cached + new * (new + 1) / 2)
        out: Float64Array = (2.0 * self.active_params * new + attention) / self.flops_per_second
        return out

    def estimate_s(
        self,
        input_len: npt.NDArray[np.int64],
        block_size: npt.NDArray[np.int64],
        block_bytes: npt.NDArray[np.int64],
        tier_hits: npt.NDArray[np.int64],
    ) -> Float64Array:
        """Seconds per request and configuration: tier_hits (requests, configurations, tiers) holds
        the hit blocks each tier served; the result is (requests, configurations)."""
        cached = (tier_hits.sum(axis=2) * block_size[:, None]).astype(np.float64)
        new = input_len.astype(np.float64)[:, None] - cached
        compute = self.compute_s(new, cached)
        loads = np.zeros(compute.shape, dtype=np.float64)
        row_bytes = block_bytes.astype(np.float64)[:, None]
        for i, link in enumerate(self.links):
            if link is None:
                continue
            hits = tier_hits[:, :, i]
            loads += hits.astype(np.float64) * row_bytes / link.bandwidth_bytes_per_s
            loads += np.where(hits > 0, link.latency_s, 0.0)
        out: Float64Array = np.maximum(compute, loads) if self.overlap else compute + loads
        return out

    def uncached_s(self, input_len: npt.NDArray[np.int64]) -> Float64Array:
        return self.compute_s(input_len.astype(np.float64), np.zeros(len(input_len)))


@dataclass(frozen=True, slots=True)
class PrefillStats:
    mean: float
    p50: float
    p90: float
    p99: float
    uncached_mean: float
    uncached_p50: float
    uncached_p90: float
    uncached_p99: float
    gpu_s_per_hour: float | None  # prefill GPU-seconds per hour of trace (None: the lane lasts 0 s)
    uncached_gpu_s_per_hour: float | None
    saved_share: float | None  # 1 - estimate / uncached, summed over requests

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _rank(sorted_values: Float64Array, q: Fraction) -> float:
    if len(sorted_values) == 0:
        return 0.0
    rank = max(1, -(-q.numerator * len(sorted_values) // q.denominator))
    return float(sorted_values[rank - 1])


QUANTILES = {"p50": decimal(0.5), "p90": decimal(0.9), "p99": decimal(0.99)}


def prefill_stats(estimate: Float64Array, uncached: Float64Array, duration_s: float) -> PrefillStats:
    """Mean and nearest-rank quantiles, GPU-seconds per hour of trace and the share saved."""
    est, unc = np.sort(estimate), np.sort(uncached)
    total, total_uncached = float(estimate.sum()), float(uncached.sum())
    hours = duration_s / 3600.0
    return PrefillStats(
        mean=float(estimate.mean()) if len(estimate) else 0.0,
        p50=_rank(est, QUANTILES["p50"]),
        p90=_rank(est, QUANTILES["p90"]),
        p99=_rank(est, QUANTILES["p99"]),
        uncached_mean=float(uncached.mean()) if len(uncached) else 0.0,
        uncached_p50=_rank(unc, QUANTILES["p50"]),
        uncached_p90=_rank(unc, QUANTILES["p90"]),
        uncached_p99=_rank(unc, QUANTILES["p99"]),
        gpu_s_per_hour=total / hours if hours > 0 else None,
        uncached_gpu_s_per_hour=total_uncached / hours if hours > 0 else None,
        saved_share=1.0 - total / total_uncached if total_uncached > 0 else None,
    )


def prefill_model(
    model: str,
    gpu: str,
    tier_names: Sequence[str],
    *,
    mfu: float = DEFAULT_MFU,
    overlap: bool = False,
    links: Mapping[str, str] | None = None,
    bandwidths: Mapping[str, float] | None = None,
    latencies: Mapping[str, float] | None = None,
    overrides: Mapping[str, float] | None = None,
    where: str = "",
) -> PrefillModel:
    """The model from presets and overrides (active_params, layers, heads, head_dim, peak_flops);
    TierError naming the flag or field on an unknown preset or a bad value."""
    prefix = f"{where}." if where else "--"
    kv = resolve_model(model, f"{prefix}model")
    card = resolve_gpu(gpu, f"{prefix}gpu")
    if not (0 < mfu <= 1):
        raise TierError(f"{prefix}mfu", f"mfu must be in (0, 1], got {mfu}")
    values: dict[str, float] = {
        "active_params": kv.active_params,
        "layers": kv.layers,
        "heads": kv.heads,
        "head_dim": kv.attention_head_dim,
        "peak_flops": card.bf16_dense_flops,
    }
    for key, value in (overrides or {}).items():
        if key not in values:
            raise TierError(f"{prefix}{key}", f"not a model constant; known: {', '.join(values)}")
        if not (value > 0 and np.isfinite(value)):
            raise TierError(f"{prefix}{key}", f"must be a positive number, got {value}")
        values[key] = value
    for name in [*(links or {}), *(bandwidths or {}), *(latencies or {})]:
        if name not in tier_names:
            raise TierError(f"{prefix}links", f"no tier named {name!r} (tiers: {', '.join(tier_names)})")
        if name == tier_names[0]:
            raise TierError(f"{prefix}links", f"tier {name} is the first tier (the GPU's memory): nothing is loaded")
    tier_links = [None] + [
        tier_link(
            name,
            (links or {}).get(name),
            (bandwidths or {}).get(name),
            (latencies or {}).get(name),
            f"{prefix}links",
        )
        for name in tier_names[1:]
    ]
    return PrefillModel(
        model=kv.name,
        gpu=card.name,
        active_params=int(values["active_params"]),
        layers=int(values["layers"]),
        heads=int(values["heads"]),
        head_dim=int(values["head_dim"]),
        peak_flops=float(values["peak_flops"]),
        mfu=mfu,
        overlap=overlap,
        links=tuple(tier_links),
    )
