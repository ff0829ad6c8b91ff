"""GLM-4.7-Flash (model_type "glm4_moe_lite"): DeepSeek-V3's layers (transformers' modeling_glm4_moe_lite.py is
modeling_deepseek_v3.py but for the dense layers' list): multi-head latent attention with an optional q LoRA and RoPE
over interleaved pairs (rope_interleave), sigmoid routing with a correction bias over grouped top-k (noaux_tc, one
group as published), ungated shared experts; which layers are dense is mlp_layer_types ("dense" | "sparse"; the
first layer dense when the config has none: transformers reads no first_k_dense_replace). The multi-token-prediction
layer a checkpoint may carry (num_nextn_predict_layers) is not read."""

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require, rope_params
from engine.model.families.deepseek_config import deepseek_moe_fields
from engine.model.families.family import Family
from engine.model.families.mla_config import mla_args
from engine.model.published_configs import GLM_47_FLASH
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "glm4_moe_lite"
# What transformers' Glm4MoeLiteConfig assumes for keys a config.json leaves out (first_k_dense_replace only feeds
# deepseek_moe_fields: mlp_layer_types decides).
DEFAULTS = dict(n_group=1, topk_group=1, n_shared_experts=1, routed_scaling_factor=1.8, norm_topk_prob=True,
                intermediate_size=10240, moe_intermediate_size=1536, kv_lora_rank=512, q_lora_rank=768,
                qk_rope_head_dim=64, v_head_dim=256, qk_nope_head_dim=192, rms_norm_eps=1e-5,
                first_k_dense_replace=1)
MLP_KINDS = ("dense", "sparse")


def moe_layers(config: dict, num_layers: int) -> tuple[bool, ...]:
    kinds = config.get("mlp_layer_types")
    if kinds is None:
        return tuple(i > 0 for i in range(num_layers))
    if not isinstance(kinds, list) or len(kinds) != num_layers or any(kind not in MLP_KINDS for kind in kinds):
        raise ModelFormatError(f"config.json: 'mlp_layer_types' must list {num_layers} entries, each 'dense' or "
                               "'sparse'")
    return tuple(kind == "sparse" for kind in kinds)


def read_config(config: dict) -> ModelArgs:
    config = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    if "q_lora_rank" in config and not config["q_lora_rank"]:
        config.pop("q_lora_rank")
    factor = first_present(rope_params(config), "partial_rotary_factor",
                           default=config.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise UnsupportedModelError(f"config.json: glm4_moe_lite with partial_rotary_factor={factor} is not "
                                    "supported (Wisp's latent attention turns the whole qk_rope_head_dim)")
    moe = deepseek_moe_fields(config, "noaux_tc", {})
    common = common_args(config, moe["num_experts"], default_theta=10000.0, scaling_types=("yarn",))
    layout = "interleaved" if config.get("rope_interleave", True) else "half"
    moe["moe_layers"] = moe_layers(config, common["num_hidden_layers"])
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, **moe, **mla_args(config, layout, common["rope_scaling"])},
    )


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    examples=("GLM-4.7-Flash",),
    layers=("multi-head latent attention, interleaved RoPE pairs; grouped sigmoid router (noaux_tc); ungated "
            "shared experts; dense first layer"),
    shapes={"glm-4.7-flash": GLM_47_FLASH},
)
