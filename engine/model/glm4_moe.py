"""GLM-4.5 / GLM-4.5-Air (model_type "glm4_moe"): DeepSeek-V3-style routing (sigmoid scores, correction bias,
grouped top-k, shared experts, first dense layers), q/k/v biases, partial RoPE, optional per-head q/k RMSNorm."""

from engine.model.args import ModelArgs, common_args, first_present
from engine.model.deepseek_config import deepseek_moe_fields
from engine.model.weight_names import QWEN_STYLE

# What transformers' Glm4MoeConfig assumes for keys a config.json leaves out.
DEFAULTS = dict(n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1, routed_scaling_factor=1.0,
                norm_topk_prob=True)
DEFAULT_PARTIAL_ROTARY_FACTOR = 0.5


def model_args(config: dict) -> ModelArgs:
    moe = deepseek_moe_fields(config, "noaux_tc", DEFAULTS)
    common = common_args(config, moe["num_experts"], default_theta=10000.0)
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    return ModelArgs(
        model_type="glm4_moe",
        **{**common, **moe},
        attention_bias=bool(config.get("attention_bias", False)),
        qk_norm="per_head" if config.get("use_qk_norm") else "none",
        partial_rotary_factor=float(first_present(rope, "partial_rotary_factor",
                                                  default=config.get("partial_rotary_factor",
                                                                     DEFAULT_PARTIAL_ROTARY_FACTOR))),
    )


WEIGHT_NAMES = QWEN_STYLE
