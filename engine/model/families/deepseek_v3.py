"""DeepSeek-V3 / Moonlight (model_type "deepseek_v3"): multi-head latent attention with interleaved RoPE pairs
(rope_interleave) and YaRN, sigmoid routing with a correction bias over grouped top-k (noaux_tc), ungated shared
experts, first dense layers."""

from engine.model.args import ModelArgs, common_args
from engine.model.families.deepseek_config import deepseek_moe_fields
from engine.model.families.family import Family
from engine.model.families.mla_config import mla_args
from engine.model.mtp_names import NEXTN
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "deepseek_v3"
# What transformers' DeepseekV3Config assumes for keys a config.json leaves out.
DEFAULTS = dict(n_group=8, topk_group=4, first_k_dense_replace=3, n_shared_experts=1, routed_scaling_factor=2.5,
                norm_topk_prob=True, intermediate_size=18432, moe_intermediate_size=2048)


def read_config(config: dict) -> ModelArgs:
    moe = deepseek_moe_fields(config, "noaux_tc", DEFAULTS)  # transformers' router ignores topk_method
    common = common_args(config, moe["num_experts"], default_theta=10000.0, scaling_types=("yarn",))
    layout = "interleaved" if config.get("rope_interleave", True) else "half"
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, **moe, **mla_args(config, layout, common["rope_scaling"])},
    )


FAMILY = Family(  # no GGUF reading yet
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    draft_layer=NEXTN,  # its multi-token-prediction layer, read for --speculative mtp/auto
    examples=("Moonlight-16B-A3B", "DeepSeek-V3"),
    layers=(
        "multi-head latent attention, interleaved RoPE pairs; grouped sigmoid router (noaux_tc); ungated "
        "shared experts; dense first layers"),
)
