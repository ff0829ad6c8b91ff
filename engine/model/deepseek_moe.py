"""The modules of a DeepSeek-style MoE layer (glm4_moe, deepseek_v2, deepseek_v3) besides its routed experts: the
router, whose parameters stay fp32 whatever the model's dtype (transformers' _keep_in_fp32_modules_strict), and
the ungated shared experts, which live on the device with the dense weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.experts.routing.grouped_routing import GroupedRouting
from engine.model.args import ModelArgs
from engine.model.layers import DenseMLP


class GroupedRouter(nn.Module):
    """x [T, D] -> fp32 logits [T, E]; select() turns them into routed ids and fp32 weights."""

    keeps_fp32 = True  # engine.model.loader loads these parameters in fp32

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(args.num_experts, args.hidden_size, dtype=torch.float32))
        if args.topk_method == "noaux_tc":
            self.e_score_correction_bias = nn.Parameter(torch.empty(args.num_experts, dtype=torch.float32))
        else:
            self.e_score_correction_bias = None
        self.routing = GroupedRouting(num_experts=args.num_experts, top_k=args.num_experts_per_tok,
                                      topk_method=args.topk_method, n_group=args.n_group, topk_group=args.topk_group,
                                      norm_topk_prob=args.norm_topk_prob,
                                      routed_scaling_factor=args.routed_scaling_factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.float(), self.weight.float())  # [T, E]

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (ids [T, K], fp32 weights [T, K]): the router's own choice, or the weights of the given ids."""
        if ids is not None:
            return ids, self.routing.weights_for(logits, ids)
        return self.routing.route(logits, self.e_score_correction_bias)


class SharedExperts(nn.Module):
    """n_shared_experts always-on experts as one SwiGLU MLP, added to the routed experts' output without a gate."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.shared_experts = DenseMLP(args.hidden_size, args.n_shared_experts * args.moe_intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared_experts(x)


def fp32_parameter_names(model: nn.Module) -> set[str]:
    """Parameters that stay fp32 when the model computes in bf16/fp16 (the routers' of DeepSeek-style layers)."""
    return {f"{prefix}.{name}" for prefix, module in model.named_modules() if getattr(module, "keeps_fp32", False)
            for name, _ in module.named_parameters()}
