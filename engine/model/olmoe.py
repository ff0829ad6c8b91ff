"""OLMoE (model_type "olmoe"): q/k RMSNorm over the whole projection, optional clip_qkv."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.weight_names import QWEN_STYLE


def model_args(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    intermediate = require(config, "intermediate_size")
    return ModelArgs(
        model_type="olmoe",
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        norm_topk_prob=bool(config.get("norm_topk_prob", False)),
        attention_bias=bool(config.get("attention_bias", False)),
        o_proj_bias=bool(config.get("attention_bias", False)),
        qk_norm="full",
        clip_qkv=config.get("clip_qkv"),
    )


WEIGHT_NAMES = QWEN_STYLE
