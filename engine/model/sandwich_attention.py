"""Attention of a sandwich-norm decoder layer (engine.model.sandwich): the paged attention of engine.model.attention
with a shape per layer kind (full layers: wider heads, fewer key/value heads, optionally keys that are also the
values), q and k normed per head, v normed without a weight, and a softmax scale of 1 (the norms set the scale)."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import Attention
from engine.model.rope_layouts import ROTATIONS
from engine.model.sandwich_layers import PowRMSNorm


def is_full_layer(args: ModelArgs, layer: int) -> bool:
    return args.layer_types[layer] == "full_attention"


class SandwichAttention(Attention):
    def __init__(self, args: ModelArgs, layer: int):
        nn.Module.__init__(self)
        self.layer, self.decode_kernel = layer, "sdpa"
        self.is_full = is_full_layer(args, layer)
        spec = args.sandwich
        self.num_heads = args.num_attention_heads
        self.num_kv_heads, self.head_dim = spec.head_shape((args.num_key_value_heads, args.head_dim), self.is_full)
        self.scale = 1.0
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(args.hidden_size, q_size, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, kv_size, bias=False)
        has_values = not (self.is_full and spec.full_keys_are_values)
        self.v_proj = nn.Linear(args.hidden_size, kv_size, bias=False) if has_values else None
        self.projection_names = ("q_proj", "k_proj", "v_proj") if has_values else ("q_proj", "k_proj")
        self.o_proj = nn.Linear(q_size, args.hidden_size, bias=False)
        self.q_norm = PowRMSNorm(self.head_dim, args.rms_norm_eps)
        self.k_norm = PowRMSNorm(self.head_dim, args.rms_norm_eps)
        self.v_norm = PowRMSNorm(self.head_dim, args.rms_norm_eps, has_weight=False)
        self.qk_norm, self.clip_qkv = "sandwich", None  # not a norm engine.model.fused_qk_rope computes
        self.rope_layout, self.rotate = args.attention.rope_layout, ROTATIONS[args.attention.rope_layout]
        self.window = args.window(layer)
        self.sinks = None
        self.is_eager = self.window is not None

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [T, D] -> q [T, H, hd], k and v [T, KVH, hd], each normed."""
        T = x.shape[0]
        q, k, *v = (t.contiguous() for t in self.project_qkv(x))
        q = q.view(T, self.num_heads, self.head_dim)
        k = k.view(T, self.num_kv_heads, self.head_dim)
        v = v[0].view(T, self.num_kv_heads, self.head_dim) if v else k
        return self.q_norm(q), self.k_norm(k), self.v_norm(v)

    def layer_rope(self, rope: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """engine.model.sandwich_layers.SandwichRotary's output -> this layer's (cos, sin)."""
        return rope[2:] if self.is_full else rope[:2]

    def forward(self, x, rope, meta, cache):
        return super().forward(x, self.layer_rope(rope), meta, cache)

    def forward_padded(self, x, rope, meta, cache):
        return super().forward_padded(x, self.layer_rope(rope), meta, cache)
