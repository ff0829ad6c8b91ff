"""Always-on experts beside the routed ones, resident on the device with the dense weights: Qwen2-MoE's one
shared expert behind a sigmoid gate, and DeepSeek-style layers' ungated shared experts."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model import gate_kernels
from engine.model.args import ModelArgs
from engine.model.layers import DenseMLP
from engine.model.moe_tail_kernels import GatedShared


class GatedSharedExpert(nn.Module):
    """One SwiGLU expert scaled by sigmoid(shared_expert_gate(x)) (qwen2_moe, qwen3_next, qwen3_5_moe)."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.shared_expert = DenseMLP(args.hidden_size, args.shared_experts.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(args.hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)

    def unscaled(self, x: torch.Tensor) -> GatedShared:
        """x [T, D] -> the gate logit [T, 1] and the expert's output [T, D], for a kernel that scales and adds them
        (engine.model.moe_tail_kernels)."""
        mlp = self.shared_expert
        if gate_kernels.applies(x):
            return GatedShared(self.shared_expert_gate(x), mlp.down_proj(gate_kernels.silu_mul(mlp.gate_proj(x),
                                                                                            mlp.up_proj(x))))
        return GatedShared(self.shared_expert_gate(x), mlp(x))


class UngatedSharedExperts(nn.Module):
    """n_shared_experts always-on experts as one SwiGLU MLP, added without a gate (glm4_moe, deepseek_v2/v3)."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        width = args.shared_experts.n_shared_experts * args.moe_intermediate_size
        self.shared_experts = DenseMLP(args.hidden_size, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared_experts(x)


def build_shared_experts(args: ModelArgs) -> nn.Module | None:
    """The layer's shared experts, as the config sizes them, or None."""
    shared = args.shared_experts
    if shared.n_shared_experts:
        return UngatedSharedExperts(args)
    return GatedSharedExpert(args) if shared.shared_expert_intermediate_size else None
