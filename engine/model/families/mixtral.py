"""Mixtral (model_type "mixtral"; llama.cpp "llama" with experts): softmax router, top-k always renormalised,
weights kept in fp32. llama.cpp's converter reorders q/k rows for its adjacent-pair RoPE."""

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import renormalising_moe
from engine.model.families.gguf_keys import GgufKeys, common_fields
from engine.model.router_args import RouterArgs
from engine.model.weight_names import MIXTRAL_STYLE

MODEL_TYPE, ARCH = "mixtral", "llama"


def read_config(config: dict) -> ModelArgs:
    num_experts = require({"num_local_experts": first_present(config, "num_local_experts", "num_experts")},
                          "num_local_experts")
    if config.get("sliding_window"):
        # Attention over a window smaller than the context changes results; refuse rather than be wrong.
        window = config["sliding_window"]
        if window < (config.get("max_position_embeddings") or 0):
            raise UnsupportedModelError(f"config.json: sliding_window={window} attention is not supported yet")
    intermediate = require(config, "intermediate_size")
    return ModelArgs(
        model_type=MODEL_TYPE,
        **common_args(config, num_experts, default_theta=1e6),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        router=RouterArgs(norm_topk_prob=True, weights_fp32=True),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    return ModelArgs(model_type=MODEL_TYPE, **common_fields(key),
                     router=RouterArgs(norm_topk_prob=True, weights_fp32=True))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=MIXTRAL_STYLE,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, rotary_permuted=True,
                    check_convertible=renormalising_moe(ARCH, True)),
    examples=("Mixtral-8x7B",),
    layers="GQA; softmax router, top-2 of 8, router weights in fp32",
)
