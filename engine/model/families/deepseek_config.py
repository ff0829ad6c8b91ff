"""The DeepSeek-family MoE keys of a config.json (glm4_moe, deepseek_v2, deepseek_v3) -> ModelArgs fields: the
grouped router and the ungated shared experts.

Torch-free: the catalog and the picker read configs through it before anything loads."""

from __future__ import annotations

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import first_present, require
from engine.model.router_args import RouterArgs
from engine.model.shared_expert_args import SharedExpertArgs

TOPK_METHODS = ("noaux_tc", "greedy", "group_limited_greedy")  # engine.experts.routing.grouped_routing


def first_dense_flags(num_layers: int, first_k_dense_replace: int) -> tuple[bool, ...]:
    """Which layers hold experts: every layer from first_k_dense_replace on (the first ones are dense MLPs)."""
    return tuple(i >= first_k_dense_replace for i in range(num_layers))


def deepseek_moe_fields(config: dict, topk_method: str, defaults: dict) -> dict:
    """ModelArgs fields of the routed and shared experts. `defaults` holds the values the model's transformers
    config class assumes for keys a config.json leaves out (they differ between glm4_moe and deepseek_v3)."""
    config = {**defaults, **{key: value for key, value in config.items() if value is not None}}
    num_experts = require({"n_routed_experts": first_present(config, "n_routed_experts", "num_local_experts")},
                          "n_routed_experts")
    fields = dict(
        num_experts=num_experts,
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=require(config, "intermediate_size"),
        moe_layers=first_dense_flags(require(config, "num_hidden_layers"), require(config, "first_k_dense_replace")),
        router=RouterArgs(kind="grouped", topk_method=topk_method, n_group=require(config, "n_group"),
                          topk_group=require(config, "topk_group"),
                          norm_topk_prob=bool(config.get("norm_topk_prob", False)),
                          routed_scaling_factor=float(require(config, "routed_scaling_factor", float))),
        shared_experts=SharedExpertArgs(n_shared_experts=require(config, "n_shared_experts")),
    )
    router = fields["router"]
    problem = routing_problem(num_experts, require(config, "num_experts_per_tok"), topk_method, router.n_group,
                              router.topk_group)
    if problem is not None:
        raise ModelFormatError(f"config.json: {problem}")
    return fields


def routing_problem(num_experts: int, top_k: int, topk_method: str, n_group: int, topk_group: int) -> str | None:
    """Why these router settings cannot route num_experts experts, or None; an unknown topk_method is an
    UnsupportedModelError."""
    if topk_method not in TOPK_METHODS:
        raise UnsupportedModelError(
            f"config.json: topk_method '{topk_method}' is not supported (supported: {', '.join(TOPK_METHODS)})")
    if n_group < 1 or num_experts % n_group:
        return f"n_group={n_group} must divide the {num_experts} routed experts (n_routed_experts)"
    if not 1 <= topk_group <= n_group:
        return f"topk_group={topk_group} must be between 1 and n_group={n_group}"
    per_group = num_experts // n_group
    if topk_method == "noaux_tc" and per_group < 2:
        return f"n_group={n_group} leaves {per_group} expert per group; noaux_tc scores a group by its best two"
    if top_k > topk_group * per_group:
        return f"num_experts_per_tok={top_k} is more than the {topk_group * per_group} experts of topk_group={topk_group} groups"
    return None
