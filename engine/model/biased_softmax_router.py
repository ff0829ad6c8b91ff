"""The biased softmax router (ModelArgs.router "biased_softmax_topk", engine.model.routers.ROUTERS): softmax over
every expert in fp32, the top-k of the probabilities plus a per-expert correction bias (for the choice only), the
chosen probabilities renormalised over a floored sum. ERNIE 4.5's router (transformers' Ernie4_5_MoeTopKRouter), op
for op: the gate and the bias stay fp32 whatever the model's dtype, the weights are fp32.

Shapes: T tokens, D hidden size, E routed experts, K experts per token (top_k).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs


class BiasedFp32Gate(nn.Module):
    """x [T, D] -> fp32 logits [T, E] from an fp32 weight; the correction bias [1, E] beside it, as the checkpoint
    stores it (one row: a single expert group)."""

    keeps_fp32 = True  # engine.model.fp32_parameters

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(args.num_experts, args.hidden_size, dtype=torch.float32))
        self.e_score_correction_bias = nn.Parameter(torch.empty(1, args.num_experts, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.float(), self.weight.float())  # [T, E]


class BiasedSoftmaxTopK:
    """Reads the gate's correction bias at each call (the loaders replace parameters after the model is built)."""

    def __init__(self, top_k: int, norm_min: float, gate: BiasedFp32Gate):
        self.top_k, self.norm_min, self.gate = top_k, norm_min, gate

    @classmethod
    def from_args(cls, args: ModelArgs, gate: BiasedFp32Gate) -> "BiasedSoftmaxTopK":
        return cls(args.num_experts_per_tok, args.biased_softmax.norm_min, gate)

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        probs = F.softmax(logits, dim=1, dtype=torch.float32)  # [T, E]
        if ids is None:
            ids = torch.topk(probs + self.gate.e_score_correction_bias.squeeze(), self.top_k, dim=-1)[1]  # [T, K]
        weights = probs.gather(-1, ids)  # [T, K]
        return ids, weights / weights.sum(dim=-1, keepdim=True).clamp(min=self.norm_min)
