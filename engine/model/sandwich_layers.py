"""The blocks of a sandwich-norm decoder (engine.model.sandwich), op for op as transformers' Gemma 4 text model:
its RMS norm (optionally without a weight), the two-table RoPE, the GELU-gated dense MLP and the scaled router.

Shapes: T tokens, D hidden size, E routed experts, K experts per token."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.experts.routing.dispatch import route as softmax_route
from engine.model.args import ModelArgs
from engine.model.layers import DenseMLP, RotaryEmbedding


class PowRMSNorm(nn.Module):
    """x * (mean(x^2) + eps)^-0.5 in fp32, times the weight in fp32 (if it has one), cast back."""

    def __init__(self, size: int, eps: float, has_weight: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size)) if has_weight else None
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float()
        normed = normed * torch.pow(normed.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        if self.weight is not None:
            normed = normed * self.weight.float()
        return normed.type_as(x)


def proportional_frequencies(head_dim: int, theta: float, fraction: float) -> torch.Tensor:
    """[head_dim / 2] inverse frequencies: int(fraction * head_dim / 2) pairs turn at frequencies of the whole head
    size, the others at 0 (cos 1, sin 0: their channels pass unchanged)."""
    turned = int(fraction * head_dim // 2)
    inv_freq = 1.0 / (theta ** (torch.arange(0, 2 * turned, 2, dtype=torch.int64).float() / head_dim))
    return torch.cat((inv_freq, torch.zeros(head_dim // 2 - turned)))


class SandwichRotary(nn.Module):
    """cos and sin of each position for both layer kinds -> (cos, sin) of the sliding layers' head size, then
    (cos, sin) of the full layers'."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        spec = args.sandwich
        self.sliding = RotaryEmbedding(args.head_dim, spec.sliding_rope_theta)
        self.full = RotaryEmbedding(spec.full_head_dim, spec.full_rope_theta)
        self.full.inv_freq.copy_(proportional_frequencies(spec.full_head_dim, spec.full_rope_theta,
                                                          spec.full_rope_fraction))

    output_dtype = staticmethod(RotaryEmbedding.output_dtype)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        return (*self.sliding(positions, dtype), *self.full(positions, dtype))


class GeluGatedMLP(DenseMLP):
    """down(gelu_tanh(gate(x)) * up(x)): the dense MLP beside the experts (DenseMLP's projections, GELU's gate)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class ScaledRouter(nn.Module):
    """Routes the layer's input (not the MLP's normed input): a weightless RMS norm, times a learned per-channel
    scale and D^-0.5, the gate's logits; softmax, top-k renormalised, each weight times its expert's learned
    scale. Weights fp32."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.norm = PowRMSNorm(args.hidden_size, args.rms_norm_eps, has_weight=False)
        self.proj = nn.Linear(args.hidden_size, args.num_experts, bias=False)
        self.scale = nn.Parameter(torch.ones(args.hidden_size))
        self.per_expert_scale = nn.Parameter(torch.ones(args.num_experts))
        self.top_k, self.root_size = args.num_experts_per_tok, args.hidden_size**-0.5

    def forward(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x [T, D] -> (ids [T, K], weights [T, K] fp32); for given ids (trace-driven), the weights they get."""
        logits = self.proj(self.norm(x) * self.scale * self.root_size)  # [T, E]
        if ids is None:
            ids, weights = softmax_route(logits, self.top_k, normalize=True, weights_fp32=True)
        else:
            weights = F.softmax(logits, dim=-1, dtype=torch.float32).gather(1, ids)  # [T, K]
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return ids, weights * self.per_expert_scale[ids]
