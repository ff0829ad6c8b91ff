"""Qwen1.5/Qwen2-MoE (model_type "qwen2_moe"): q/k/v biases and a shared expert behind a sigmoid gate."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.weight_names import QWEN_STYLE


def model_args(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    return ModelArgs(
        model_type="qwen2_moe",
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        norm_topk_prob=bool(config.get("norm_topk_prob", False)),
        attention_bias=bool(config.get("qkv_bias", True)),
        shared_expert_intermediate_size=require(config, "shared_expert_intermediate_size"),
    )


WEIGHT_NAMES = QWEN_STYLE
