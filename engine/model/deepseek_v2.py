"""DeepSeek-V2 / V2-Lite (model_type "deepseek_v2"): multi-head latent attention with complex-number RoPE."""

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require
from engine.model.mla_args import dense_layer_flags, mla_args
from engine.model.weight_names import QWEN_STYLE


def model_args(config: dict) -> ModelArgs:
    num_experts = require(config, "n_routed_experts")
    if (config.get("n_shared_experts") or config.get("topk_method", "greedy") != "greedy"
            or config.get("routed_scaling_factor", 1.0) != 1.0):
        raise UnsupportedModelError("deepseek_v2: shared experts and grouped or scaled routing are not supported yet")
    common = common_args(config, num_experts, default_theta=10000.0, scaling_types=("yarn",))
    return ModelArgs(
        model_type="deepseek_v2",
        **{**common, **mla_args(config, "complex", common["rope_scaling"]),
           "moe_layers": dense_layer_flags(config, common["num_hidden_layers"])},
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        norm_topk_prob=False,
    )


WEIGHT_NAMES = QWEN_STYLE
