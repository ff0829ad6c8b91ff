"""Mixtral (model_type "mixtral"): softmax router, top-k always renormalised, weights kept in fp32."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.weight_names import MIXTRAL_STYLE


def model_args(config: dict) -> ModelArgs:
    num_experts = require({"num_local_experts": first_present(config, "num_local_experts", "num_experts")}, "num_local_experts")
    if config.get("sliding_window"):
        # Attention over a window smaller than the context changes results; refuse rather than be wrong.
        window = config["sliding_window"]
        if window < (config.get("max_position_embeddings") or 0):
            from engine.errors import UnsupportedModelError

            raise UnsupportedModelError(f"config.json: sliding_window={window} attention is not supported yet")
    intermediate = require(config, "intermediate_size")
    return ModelArgs(
        model_type="mixtral",
        **common_args(config, num_experts, default_theta=1e6),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        norm_topk_prob=True,
        router_weights_fp32=True,
    )


WEIGHT_NAMES = MIXTRAL_STYLE
