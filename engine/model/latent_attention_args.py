"""The numbers of multi-head latent attention (MLA: deepseek_v2, deepseek_v3; engine.model.mla_attention)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LatentAttentionArgs:
    """ModelArgs.head_dim is the RoPE part of each head (qk_rope_head_dim); the KV cache holds kv_lora_rank +
    qk_rope_head_dim values per token and layer."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None  # None: q_proj straight from the hidden state
