"""Hardware presets of the prefill model: GPUs and the links a cache tier is read over.

Every figure is a vendor's published peak, so a reader can check it, and every one can be
overridden: a preset is a starting point, never a measurement of a machine.

GPUs: dense (no 2:4 sparsity) BF16 tensor-core peak and the memory of one GPU, from the vendors'
spec sheets (NVIDIA H100 SXM5, H200 SXM, HGX B200, A100 SXM 80GB, L40S; AMD Instinct MI300X).

Links: the bandwidth of one direction and a per-request latency (paid once by a tier that serves
any block of a request). PCIe x16 is the link's raw rate after 128b/130b coding; NVMe is a
PCIe Gen4 x4 data-centre SSD's sequential read; RDMA is the line rate of one NIC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from litehit.kv_models import MODELS, KvModel, model_named
from litehit.tiers.config import TierError

__all__ = [
    "DEFAULT_LINKS",
    "GPUS",
    "LINKS",
    "Gpu",
    "Link",
    "TierLink",
    "gpu_named",
    "link_named",
    "resolve_gpu",
    "resolve_model",
    "spare_hbm_bytes",
    "tier_link",
]

GB = 10**9  # vendors quote memory and bandwidth in decimal units
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default share of the GPU's memory it may use
WEIGHT_BYTES_PER_PARAM = 2  # bf16 weights
DEFAULT_LINKS = {"dram": "pcie-gen5", "cpu": "pcie-gen5", "host": "pcie-gen5", "ssd": "nvme", "nvme": "nvme",
                 "disk": "nvme", "remote": "rdma-400", "rdma": "rdma-400", "network": "rdma-400"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    bf16_dense_flops: float  # FLOP/s, dense BF16 tensor peak
    memory_bytes: int  # the GPU's own memory (HBM or GDDR), decimal GB as published
    source: str


@dataclass(frozen=True, slots=True)
class Link:
    name: str
    bandwidth_bytes_per_s: float
    latency_s: float
    source: str


GPUS: tuple[Gpu, ...] = (
    Gpu("H100-SXM", 989.4e12, 80 * GB, "NVIDIA H100 SXM5: 1,979 TFLOPS BF16 with sparsity, 80 GB HBM3"),
    Gpu("H200", 989.4e12, 141 * GB, "NVIDIA H200 SXM: 1,979 TFLOPS BF16 with sparsity, 141 GB HBM3e"),
    Gpu("B200", 2250e12, 180 * GB, "NVIDIA HGX B200: 4.5 PFLOPS BF16 with sparsity, 180 GB HBM3e per GPU"),
    Gpu("A100-80GB", 312e12, 80 * GB, "NVIDIA A100 SXM 80GB: 312 TFLOPS BF16 dense, 80 GB HBM2e"),
    Gpu("L40S", 362.05e12, 48 * GB, "NVIDIA L40S: 362.05 TFLOPS BF16 dense (733 with sparsity), 48 GB GDDR6"),
    Gpu("MI300X", 1307.4e12, 192 * GB, "AMD Instinct MI300X: 1,307.4 TFLOPS BF16 dense, 192 GB HBM3"),
)

LINKS: tuple[Link, ...] = (
    Link("pcie-gen4", 16e9 * 16 * 128 / 130 / 8, 10e-6, "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b"),
    Link("pcie-gen5", 32e9 * 16 * 128 / 130 / 8, 10e-6, "PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b"),
    Link("nvme", 7e9, 100e-6, "a PCIe Gen4 x4 NVMe SSD: 7 GB/s sequential read, 100 us to first byte"),
    Link("rdma-200", 200e9 / 8, 5e-6, "one 200 Gb/s RDMA NIC (HDR InfiniBand / RoCE)"),
    Link("rdma-400", 400e9 / 8, 5e-6, "one 400 Gb/s RDMA NIC (NDR InfiniBand / RoCE)"),
)

_GPUS = {g.name.lower(): g for g in GPUS}
_LINKS = {k.name.lower(): k for k in LINKS}


def gpu_named(name: str) -> Gpu | None:
    """The GPU preset of this name, case-insensitive; None when there is none."""
    return _GPUS.get(name.lower())


def link_named(name: str) -> Link | None:
    """The link preset of this name, case-insensitive; None when there is none."""
    return _LINKS.get(name.lower())


@dataclass(frozen=True, slots=True)
class TierLink:
    """How a tier below the first is read into the GPU."""

    link: str  # the preset's name, or "custom"
    bandwidth_bytes_per_s: float
    latency_s: float

    def as_dict(self) -> dict[str, Any]:
        return {"link": self.link, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "latency_s": self.latency_s}


def _names(items: Sequence[Gpu] | Sequence[Link] | Sequence[KvModel]) -> str:
    return ", ".join(item.name for item in items)


def resolve_gpu(name: str, where: str = "--gpu") -> Gpu:
    gpu = gpu_named(name)
    if gpu is None:
        raise TierError(where, f"unknown GPU {name!r}; known: {_names(GPUS)}")
    return gpu


def resolve_model(name: str, where: str = "--model") -> KvModel:
    model = model_named(name)
    if model is None or model.active_params == 0:
        raise TierError(where, f"unknown model {name!r}; known: {_names(MODELS)}")
    return model


def tier_link(tier: str, preset: str | None, bandwidth: float | None, latency: float | None, where: str) -> TierLink:
    """The link of a tier below the first: a preset (given, or the default for its name: dram ->
    pcie-gen5, ssd -> nvme, remote -> rdma-400), with its bandwidth or latency overridden."""
    name = preset or DEFAULT_LINKS.get(tier.lower())
    link: Link | None = None
    if name is not None:
        link = link_named(name)
        if link is None:
            raise TierError(where, f"unknown link {name!r} for tier {tier}; known: {_names(LINKS)}")
    elif bandwidth is None:
        raise TierError(
            where,
            f"tier {tier} needs a link ({_names(LINKS)}) or a bandwidth: its name says nothing about how it is read",
        )
    if bandwidth is not None and not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise TierError(where, f"bandwidth of tier {tier} must be a positive number of bytes/s, got {bandwidth}")
    if latency is not None and not (latency >= 0 and math.isfinite(latency)):
        raise TierError(where, f"latency of tier {tier} must be a number of seconds >= 0, got {latency}")
    custom = bandwidth is not None or latency is not None
    return TierLink(
        link=(link.name if link is not None else "custom") + (" (overridden)" if custom and link is not None else ""),
        bandwidth_bytes_per_s=bandwidth if bandwidth is not None else link.bandwidth_bytes_per_s,  # type: ignore[union-attr]
        latency_s=latency if latency is not None else (link.latency_s if link is not None else 0.0),
    )


def spare_hbm_bytes(
    model: str, gpu: str, utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION, where: str = "--tier"
) -> int:
    """The GPU memory left for the KV cache: memory x utilization - bf16 weights (total
    parameters x 2 B); activations are left out. TierError when the weights do not fit."""
    kv = resolve_model(model)
    card = resolve_gpu(gpu)
    spare = int(card.memory_bytes * utilization) - kv.params * WEIGHT_BYTES_PER_PARAM
    if spare <= 0:
        raise TierError(
            where,
            f"{kv.name}'s weights ({kv.params * WEIGHT_BYTES_PER_PARAM / 1e9:.1f} GB in bf16) do not fit in "
            f"{utilization:g} x {card.memory_bytes / 1e9:g} GB of one {card.name}: no HBM is spare",
        )
    return spare
