"""How a MoE layer's router picks experts and weighs them (engine.model.routers.ROUTERS)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RouterArgs:
    norm_topk_prob: bool  # renormalise the top-k weights to sum to 1
    kind: str = "softmax_topk"  # engine.model.routers.ROUTERS: "softmax_topk" | "topk_softmax" | "grouped"
    bias: bool = False  # the gate's bias (gpt_oss)
    weights_fp32: bool = False  # mixtral keeps top-k weights in fp32 when scaling expert outputs
    # the grouped router (glm4_moe, deepseek_v2, deepseek_v3): engine.experts.routing.grouped_routing
    topk_method: str | None = None
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0

    def __post_init__(self):
        if (self.kind == "grouped") != (self.topk_method is not None):
            raise ValueError(f"RouterArgs: router '{self.kind}' with topk_method {self.topk_method!r} (the grouped "
                             "router and only it reads a topk_method)")
