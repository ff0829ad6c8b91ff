"""config.json -> ModelArgs for the hybrid linear-attention models (qwen3_next, qwen3_5_moe)."""

from __future__ import annotations

from engine.errors import ModelFormatError
from engine.model.args import ModelArgs, common_args, first_present, require, rope_params
from engine.model.attention_args import AttentionArgs
from engine.model.linear_args import LinearAttentionArgs
from engine.model.router_args import RouterArgs
from engine.model.shared_expert_args import SharedExpertArgs

LAYER_KINDS = ("linear_attention", "full_attention")


def layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    """The published layer_types, or every full_attention_interval-th layer full (the others linear)."""
    types = config.get("layer_types")
    if types is None:
        interval = config.get("full_attention_interval") or 4
        return tuple(LAYER_KINDS[(i + 1) % interval == 0] for i in range(num_layers))
    if not isinstance(types, list) or len(types) != num_layers or any(t not in LAYER_KINDS for t in types):
        raise ModelFormatError(f"config.json: 'layer_types' must list {num_layers} entries, each one of "
                               f"{', '.join(LAYER_KINDS)}")
    return tuple(types)


def linear_args(config: dict, projections: str) -> LinearAttentionArgs:
    linear = LinearAttentionArgs(
        num_key_heads=require(config, "linear_num_key_heads"),
        num_value_heads=require(config, "linear_num_value_heads"),
        key_head_dim=require(config, "linear_key_head_dim"), value_head_dim=require(config, "linear_value_head_dim"),
        conv_kernel_dim=require(config, "linear_conv_kernel_dim"), projections=projections)
    if linear.num_value_heads % linear.num_key_heads:
        raise ModelFormatError("config.json: linear_num_value_heads must be a multiple of linear_num_key_heads")
    return linear


def hybrid_args(config: dict, model_type: str, projections: str, norm_topk_prob: bool) -> ModelArgs:
    """ModelArgs of a config.json; `projections`: the DeltaNet's input projections (engine.model.linear_args)."""
    num_layers = require(config, "num_hidden_layers")
    factor = first_present(rope_params(config), "partial_rotary_factor",
                           default=config.get("partial_rotary_factor", 1.0))
    return ModelArgs(
        model_type=model_type,
        **common_args(config, require(config, "num_experts"), default_theta=10000.0),
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=norm_topk_prob),
        attention=AttentionArgs(
            attention_bias=bool(config.get("attention_bias", False)),
            o_proj_bias=bool(config.get("attention_bias", False)),
            qk_norm="per_head",  # zero-centred in engine.model.hybrid_layers.GatedAttention
            partial_rotary_factor=float(factor),
            attention_output_gate=True),
        layer_types=layer_types(config, num_layers),
        shared_experts=SharedExpertArgs(
            shared_expert_intermediate_size=config.get("shared_expert_intermediate_size") or 0),
        linear=linear_args(config, projections),
    )
