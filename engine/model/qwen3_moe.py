"""Qwen3-MoE (model_type "qwen3_moe"): per-head q/k RMSNorm, softmax router, optional top-k renorm."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.weight_names import QWEN_STYLE


def model_args(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    return ModelArgs(
        model_type="qwen3_moe",
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        norm_topk_prob=bool(config.get("norm_topk_prob", False)),
        attention_bias=bool(config.get("attention_bias", False)),
        o_proj_bias=bool(config.get("attention_bias", False)),
        qk_norm="per_head",
    )


WEIGHT_NAMES = QWEN_STYLE
