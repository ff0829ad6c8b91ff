"""The numbers of a sandwich-norm decoder (engine.model.sandwich): sliding-window layers and wider full-attention
layers with shapes and RoPE of their own, a dense MLP beside the MoE block in every layer, and soft-capped logits."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandwichArgs:
    full_head_dim: int  # the full-attention layers' head size (the sliding layers': ModelArgs.head_dim)
    full_kv_heads: int  # their key/value heads (the sliding layers': ModelArgs.num_key_value_heads)
    full_keys_are_values: bool  # full layers have no v_proj: the values are the keys' projection (before its norm)
    sliding_rope_theta: float
    full_rope_theta: float
    # full layers turn int(fraction * head_dim / 2) rotary pairs, with frequencies of the whole head size
    # (transformers' "proportional" RoPE); the other pairs keep their channels as they are
    full_rope_fraction: float
    logit_softcap: float | None = None  # logits -> cap * tanh(logits / cap)

    def head_shape(self, heads_and_dim: tuple[int, int], is_full: bool) -> tuple[int, int]:
        """(kv heads, head dim) of a layer, from the sliding layers' (kv heads, head dim)."""
        return (self.full_kv_heads, self.full_head_dim) if is_full else heads_and_dim

    def layer_shapes(self, layer_types: tuple[str, ...], kv_heads: int, head_dim: int) -> list[tuple[int, int]]:
        """(kv heads, head dim) of every layer, from the sliding layers' kv_heads and head_dim."""
        return [self.head_shape((kv_heads, head_dim), kind == "full_attention") for kind in layer_types]

    def kv_bytes_per_token(self, layer_types: tuple[str, ...], kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
        """K and V of every layer: the full layers' keys are stored twice too (as keys, and normed as values)."""
        return sum(2 * heads * dim * dtype_bytes for heads, dim in self.layer_shapes(layer_types, kv_heads, head_dim))
