"""The options of a model's attention layers (engine.model.attention, mla_attention, rope_layouts, hybrid_layers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionArgs:
    sliding_window: int | None = None  # the window of the "sliding_attention" layers
    attention_sinks: bool = False  # a learned per-head logit joins every softmax (and takes no value)
    qk_norm: str = "none"  # "none" | "per_head" (qwen3) | "full" (olmoe)
    attention_bias: bool = False  # q, k and v projections' biases (MLA: q_a, kv_a and o)
    o_proj_bias: bool = False
    clip_qkv: float | None = None
    partial_rotary_factor: float = 1.0  # RoPE turns the first int(head_dim * factor) channels of each head
    rope_layout: str = "half"  # engine.model.rope_layouts: "half" | "interleaved" (deepseek_v3) | "complex" (v2)
    attention_scale: float | None = None  # softmax scale; None: head_dim ** -0.5
    attention_output_gate: bool = False  # q_proj also yields a sigmoid gate on the attention output
