"""The routers of a MoE layer: a gate module computes the logits, a router object picks each token's experts and
their weights from them. MoeBlock builds both from ModelArgs.router (RouterArgs), which the family's config reader sets:

- "softmax_topk" (Qwen, Mixtral, OLMoE): softmax over every expert, top-k of the probabilities, optionally
  renormalised; weights in the logits' dtype, or fp32 (Mixtral scales its experts' outputs in fp32).
- "topk_softmax" (gpt-oss, transformers' GptOssTopKRouter): top-k of the (biased) logits, then a softmax over
  those k alone, in the logits' dtype; ids largest logit first, as torch.topk orders them.
- "grouped" (glm4_moe, deepseek_v2, deepseek_v3): DeepSeek-style routing (engine.experts.routing.grouped_routing)
  from an fp32 gate that keeps its parameters fp32 whatever the model's dtype (transformers'
  _keep_in_fp32_modules_strict), with noaux_tc's per-expert correction bias beside the weight.
- "biased_softmax_topk" (ernie4_5_moe): engine.model.biased_softmax_router.

Every router's `select(logits, ids=None)` gives (ids [T, K], weights [T, K]): its own choice, or, for given ids
(trace-driven benchmarks choose them), the weights it would give them. No host sync: graphable.

Shapes: T tokens, D hidden size, E routed experts, K experts per token (top_k).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.experts.routing.dispatch import route as softmax_route
from engine.model.biased_softmax_router import BiasedFp32Gate, BiasedSoftmaxTopK
from engine.experts.routing.grouped_routing import GroupedRouting
from engine.model.args import ModelArgs
from engine.model.sigmoid_router import SigmoidGate, SigmoidTopK
from engine.system.triton_support import fused_step


class SoftmaxTopK:
    """Softmax over all experts, then the top-k probabilities (optionally renormalised)."""

    def __init__(self, top_k: int, normalize: bool, weights_fp32: bool):
        self.top_k, self.normalize, self.weights_fp32 = top_k, normalize, weights_fp32

    @classmethod
    def from_args(cls, args: ModelArgs, gate: nn.Module) -> "SoftmaxTopK":
        return cls(args.num_experts_per_tok, args.router.norm_topk_prob, args.router.weights_fp32)

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if ids is None:
            return softmax_route(logits, self.top_k, self.normalize, self.weights_fp32)
        return ids, self.weights_of(logits, ids)

    def weights_of(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The weights select() gives to given ids [T, K], as route() computes them for its own choice."""
        if logits.is_cuda and fused_step():  # the same weights in one kernel
            from engine.experts.routing import fused_router

            if fused_router.can_fuse(logits):
                dtype = torch.float32 if self.weights_fp32 else logits.dtype
                return fused_router.fused_route(logits, ids.shape[1], self.normalize, dtype, ids)[1]
        weights = F.softmax(logits, dim=-1, dtype=torch.float32).gather(1, ids)  # [T, K]
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights if self.weights_fp32 else weights.to(logits.dtype)


class TopKSoftmax:
    """The top-k logits, then a softmax over those k alone, in the logits' dtype."""

    def __init__(self, top_k: int):
        self.top_k = top_k

    @classmethod
    def from_args(cls, args: ModelArgs, gate: nn.Module) -> "TopKSoftmax":
        return cls(args.num_experts_per_tok)

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if ids is None:
            values, ids = torch.topk(logits, self.top_k, dim=-1)  # [T, K]
        else:
            values = logits.gather(1, ids)  # [T, K]
        return ids, F.softmax(values, dim=1, dtype=values.dtype)


class Fp32Gate(nn.Module):
    """x [T, D] -> fp32 logits [T, E], from fp32 parameters (the loaders keep them fp32: keeps_fp32); noaux_tc's
    e_score_correction_bias [E] beside the weight."""

    keeps_fp32 = True  # engine.model.fp32_parameters

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(args.num_experts, args.hidden_size, dtype=torch.float32))
        if args.router.topk_method == "noaux_tc":
            self.e_score_correction_bias = nn.Parameter(torch.empty(args.num_experts, dtype=torch.float32))
        else:
            self.e_score_correction_bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.float(), self.weight.float())  # [T, E]


class GroupedTopK:
    """DeepSeek-style grouped routing, fp32 weights; reads the gate's correction bias at each call (the loaders
    replace parameters after the model is built)."""

    def __init__(self, routing: GroupedRouting, gate: Fp32Gate):
        self.routing, self.gate = routing, gate

    @classmethod
    def from_args(cls, args: ModelArgs, gate: Fp32Gate) -> "GroupedTopK":
        router = args.router
        routing = GroupedRouting(num_experts=args.num_experts, top_k=args.num_experts_per_tok,
                                 topk_method=router.topk_method, n_group=router.n_group, topk_group=router.topk_group,
                                 norm_topk_prob=router.norm_topk_prob,
                                 routed_scaling_factor=router.routed_scaling_factor)
        return cls(routing, gate)

    def select(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if ids is not None:
            return ids, self.routing.weights_for(logits, ids)
        return self.routing.route(logits, self.gate.e_score_correction_bias)


def linear_gate(args: ModelArgs) -> nn.Linear:
    return nn.Linear(args.hidden_size, args.num_experts, bias=args.router.bias)


# ModelArgs.router.kind -> (the gate module's builder, the router's class)
ROUTERS = {
    "softmax_topk": (linear_gate, SoftmaxTopK),
    "topk_softmax": (linear_gate, TopKSoftmax),
    "grouped": (Fp32Gate, GroupedTopK),
    "biased_softmax_topk": (BiasedFp32Gate, BiasedSoftmaxTopK),
    "sigmoid_topk": (SigmoidGate, SigmoidTopK),  # lfm2_moe: engine.model.sigmoid_router
}


def build_router(args: ModelArgs):
    """-> (gate module: x [T, D] -> logits [T, E], router object with select())."""
    if args.router.kind not in ROUTERS:
        raise ValueError(f"unknown router '{args.router.kind}' (known: {', '.join(ROUTERS)})")
    make_gate, router_class = ROUTERS[args.router.kind]
    gate = make_gate(args)
    return gate, router_class.from_args(args, gate)
