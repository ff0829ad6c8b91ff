"""DeepSeek-V2 / V2-Lite (model_type "deepseek_v2"): multi-head latent attention with complex-number RoPE (and
YaRN), softmax routing (greedy or group_limited_greedy), ungated shared experts, first dense layers."""

from engine.model.args import ModelArgs, common_args
from engine.model.families.deepseek_config import deepseek_moe_fields
from engine.model.families.family import Family
from engine.model.families.mla_config import mla_args
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "deepseek_v2"
# What transformers' DeepseekV2Config assumes for keys a config.json leaves out.
DEFAULTS = dict(n_group=1, topk_group=1, first_k_dense_replace=0, n_shared_experts=2, routed_scaling_factor=1.0,
                norm_topk_prob=False, intermediate_size=11008, moe_intermediate_size=1407)


def read_config(config: dict) -> ModelArgs:
    moe = deepseek_moe_fields(config, config.get("topk_method") or "greedy", DEFAULTS)
    common = common_args(config, moe["num_experts"], default_theta=10000.0, scaling_types=("yarn",))
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, **moe, **mla_args(config, "complex", common["rope_scaling"])},
    )


FAMILY = Family(  # no GGUF reading yet
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    examples=("DeepSeek-V2-Lite", "DeepSeek-V2"),
    layers=(
        "multi-head latent attention, complex-number RoPE with YaRN; grouped softmax router; ungated shared "
        "experts; dense first layers"),
)
