"""Sigmoid routing (lfm2_moe, transformers' Lfm2MoeTopKRouter): each expert's score is sigmoid(logit); the top-k
are chosen by score plus a per-expert bias (kept fp32, as transformers' expert_bias buffer), weighted by their
scores alone, optionally renormalised (with 1e-6 in the sum) and scaled.

Shapes: T tokens, D hidden size, E routed experts, K experts per token."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs

RENORM_EPS = 1e-6


class ExpertBias(nn.Module):
    """The selection bias [E], fp32 whatever the model's dtype."""

    keeps_fp32 = True  # engine.model.fp32_parameters

    def __init__(self, num_experts: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(num_experts, dtype=torch.float32))


class SigmoidGate(nn.Module):
    """x [T, D] -> logits [T, E] in x's dtype; the expert bias beside the weight."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(args.num_experts, args.hidden_size))
        self.expert_bias = ExpertBias(args.num_experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class SigmoidTopK:
    """Reads the gate's bias at each call (the loaders replace parameters after the model is built)."""

    def __init__(self, gate: SigmoidGate, top_k: int, normalize: bool, scale: float):
        self.gate, self.top_k, self.normalize, self.scale = gate, top_k, normalize, scale

    @classmethod
    def from_args(cls, args: ModelArgs, gate: SigmoidGate) -> "SigmoidTopK":
        return cls(gate, args.num_experts_per_tok, args.router.norm_topk_prob, args.router.routed_scaling_factor)

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        scores = logits.sigmoid()  # [T, E]
        if ids is None:
            ids = torch.topk(scores + self.gate.expert_bias.weight, self.top_k, dim=-1).indices  # [T, K]
        weights = scores.gather(1, ids)  # [T, K]
        if self.normalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + RENORM_EPS)
        return ids, weights * self.scale

