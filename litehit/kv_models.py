"""KV-cache bytes per token from a model's shape, and a table of common open models.

One token of context keeps, in every layer, a key and a value vector per KV head (grouped-query
attention: fewer KV heads than query heads)::

    bytes/token = layers x KV heads x head dim x 2 (K and V) x dtype bytes

A multi-head latent attention (MLA) model keeps one compressed latent plus the decoupled rotary
key per layer instead::

    bytes/token = layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes

The shapes below are the models' published ``config.json`` values (``num_hidden_layers``,
``num_key_value_heads``, ``head_dim`` or ``hidden_size / num_attention_heads``; for MLA
``kv_lora_rank`` and ``qk_rope_head_dim``), so a reader can check each figure. Every layer is
counted with full attention: a sliding window (Mistral-7B-v0.1) bounds how much a sequence keeps,
not what one token costs. Bytes per element: bf16 and fp16 2 (the default), fp8 1.

A hybrid model (linear attention or Mamba layers beside full attention) keeps a KV cache in its
full-attention layers only (``layers`` counts those), and one fixed-size recurrent state per
sequence position where a state is saved, over all its linear layers::

    state bytes = linear layers x state elements per layer x dtype bytes

    Gated DeltaNet (Qwen3-Next):  value heads x key head dim x value head dim          (recurrent)
                                  + (2 x key heads x key head dim + value heads x value head dim)
                                    x (conv kernel - 1)                                 (convolution)

The state is counted in the KV dtype (vLLM's default keeps it in the model's dtype; a float32
state is twice as big: give ``linear_state_bytes`` then, with ``kv_bytes_per_token``).

For the prefill model (litehit.tiers.prefill) a model also has its published parameter count
(active parameters per token for a mixture of experts), its query heads
(``num_attention_heads``) and the dimension of one head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_BYTES_PER_TOKEN",
    "DEFAULT_KV_DTYPE",
    "KV_BYTES_ASSUMED",
    "KV_BYTES_OPTIONS",
    "KV_DTYPE_BYTES",
    "MODELS",
    "KvModel",
    "assumed_kv_note",
    "model_named",
]

KV_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
DEFAULT_KV_DTYPE = "bf16"
DEFAULT_BYTES_PER_TOKEN = 2048  # 1 MiB per 512-token block: assumed when no KV bytes are given
KV_BYTES_OPTIONS = ("model", "kv_bytes_per_token", "block_bytes")  # each sets the KV bytes: one at most
KV_BYTES_ASSUMED = "kv_bytes_assumed"
"""The replay config field the shorthand sets when it assumed DEFAULT_BYTES_PER_TOKEN."""


def assumed_kv_note(spec: Mapping[str, Any]) -> str | None:
    """The one line every output of a job carries when its replay config assumed the default KV
    bytes (a shorthand without model, kv_bytes_per_token or block_bytes); None otherwise. spec: a
    replay config, a job spec holding one under "config", or a query spec (flag copied)."""
    config = spec.get("config", spec)
    if not isinstance(config, Mapping) or config.get(KV_BYTES_ASSUMED) is not True:
        return None
    return (
        f"note: KV bytes per token not given: assuming {DEFAULT_BYTES_PER_TOKEN} B/token "
        "(give model or kv_bytes_per_token; GiB capacities are only as right as that)"
    )


@dataclass(frozen=True, slots=True)
class KvModel:
    """The KV-cache shape of one model: GQA (kv_heads, head_dim) or MLA (kv_lora_rank,
    qk_rope_head_dim)."""

    name: str
    config_repo: str  # where its config.json is published (Hugging Face)
    layers: int
    kv_heads: int = 0
    head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # the prefill model's shape (litehit.tiers.prefill): parameters a token passes through
    # (active parameters of a mixture of experts), query heads and the dimension of one head
    active_params: int = 0
    heads: int = 0
    attention_head_dim: int = 0
    total_params: int = 0  # a mixture of experts: all its weights (0: the same as active_params)
    # a hybrid model: its linear-attention (or Mamba) layers and one layer's state elements
    linear_layers: int = 0
    linear_state_elements: int = 0

    @property
    def is_hybrid(self) -> bool:
        return self.linear_layers > 0

    def state_bytes(self, dtype: str = DEFAULT_KV_DTYPE) -> int:
        """Bytes of one saved recurrent state over all linear layers (0 for a Full-only model)."""
        return self.linear_layers * self.linear_state_elements * KV_DTYPE_BYTES[dtype]

    @property
    def params(self) -> int:
        """Parameters held in memory (every expert of a mixture)."""
        return self.total_params or self.active_params

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def elements_per_token(self) -> int:
        """Cached numbers per token over all layers."""
        if self.is_mla:
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return self.layers * self.kv_heads * self.head_dim * 2

    def bytes_per_token(self, dtype: str = DEFAULT_KV_DTYPE) -> int:
        """KV-cache bytes of one token in dtype (a key of KV_DTYPE_BYTES)."""
        return self.elements_per_token() * KV_DTYPE_BYTES[dtype]

    def shape(self) -> str:
        """The formula with this model's numbers, e.g. ``32 layers x 8 KV heads x 128 head dim x 2``."""
        if self.is_mla:
            latent = f"{self.kv_lora_rank} kv_lora_rank + {self.qk_rope_head_dim} qk_rope_head_dim"
            return f"{self.layers} layers x ({latent}) MLA"
        full = f"{self.layers} layers x {self.kv_heads} KV heads x {self.head_dim} head dim x 2 (K, V)"
        if self.is_hybrid:
            return f"{full}; state: {self.linear_layers} linear layers x {self.linear_state_elements:,} elements"
        return full


MODELS: tuple[KvModel, ...] = (
    # config.json: num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32
    KvModel(
        "Llama-3.1-8B",
        "meta-llama/Llama-3.1-8B",
        layers=32,
        kv_heads=8,
        head_dim=128,
        active_params=8_030_000_000,
        heads=32,
        attention_head_dim=128,
    ),
    # num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192 / num_attention_heads 64
    KvModel(
        "Llama-3.1-70B",
        "meta-llama/Llama-3.1-70B",
        layers=80,
        kv_heads=8,
        head_dim=128,
        active_params=70_600_000_000,
        heads=64,
        attention_head_dim=128,
    ),
    # num_hidden_layers 28, num_key_value_heads 4, hidden_size 3584 / num_attention_heads 28
    KvModel(
        "Qwen2.5-7B",
        "Qwen/Qwen2.5-7B",
        layers=28,
        kv_heads=4,
        head_dim=128,
        active_params=7_610_000_000,
        heads=28,
        attention_head_dim=128,
    ),
    # num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192 / num_attention_heads 64
    KvModel(
        "Qwen2.5-72B",
        "Qwen/Qwen2.5-72B",
        layers=80,
        kv_heads=8,
        head_dim=128,
        active_params=72_700_000_000,
        heads=64,
        attention_head_dim=128,
    ),
    # num_hidden_layers 36, num_key_value_heads 8, head_dim 128
    KvModel(
        "Qwen3-8B",
        "Qwen/Qwen3-8B",
        layers=36,
        kv_heads=8,
        head_dim=128,
        active_params=8_190_000_000,
        heads=32,
        attention_head_dim=128,
    ),
    # num_hidden_layers 64, num_key_value_heads 8, head_dim 128 (not hidden_size 5120 / 64 heads)
    KvModel(
        "Qwen3-32B",
        "Qwen/Qwen3-32B",
        layers=64,
        kv_heads=8,
        head_dim=128,
        active_params=32_800_000_000,
        heads=64,
        attention_head_dim=128,
    ),
    # num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32
    KvModel(
        "Mistral-7B",
        "mistralai/Mistral-7B-v0.3",
        layers=32,
        kv_heads=8,
        head_dim=128,
        active_params=7_250_000_000,
        heads=32,
        attention_head_dim=128,
    ),
    # hybrid: num_hidden_layers 48, full_attention_interval 4 (12 full-attention layers with
    # num_key_value_heads 2, head_dim 256, 16 query heads; 36 Gated DeltaNet layers with
    # linear_num_value_heads 32, linear_num_key_heads 16, linear_key_head_dim 128,
    # linear_value_head_dim 128, linear_conv_kernel_dim 4): a state layer holds
    # 32 x 128 x 128 + (2 x 16 x 128 + 32 x 128) x 3 = 548,864 elements; 80 B parameters, 3 B active
    KvModel(
        "Qwen3-Next-80B-A3B",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        layers=12,
        kv_heads=2,
        head_dim=256,
        active_params=3_000_000_000,
        total_params=80_000_000_000,
        heads=16,
        attention_head_dim=256,
        linear_layers=36,
        linear_state_elements=32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3,
    ),
    # num_hidden_layers 61, kv_lora_rank 512, qk_rope_head_dim 64; 671 B parameters of which 37 B
    # active per token; 128 heads attending with 192-dim queries/keys (128 + 64 rope) and 128-dim
    # values: 160, their mean, is the one head_dim of the prefill formula
    KvModel(
        "DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3",
        layers=61,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        active_params=37_000_000_000,
        total_params=671_000_000_000,
        heads=128,
        attention_head_dim=160,
    ),
)

_BY_NAME = {m.name.lower(): m for m in MODELS}


def model_named(name: str) -> KvModel | None:
    """The preset of this name, case-insensitive; None when there is none."""
    return _BY_NAME.get(name.lower())
