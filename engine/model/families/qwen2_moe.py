"""Qwen1.5/Qwen2-MoE (model_type "qwen2_moe"; llama.cpp "qwen2moe"): q/k/v biases and a shared expert behind a
sigmoid gate; llama.cpp's graph never renormalises the top-k router weights."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import renormalising_moe
from engine.model.families.gguf_keys import GgufKeys, common_fields
from engine.model.router_args import RouterArgs
from engine.model.shared_expert_args import SharedExpertArgs
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "qwen2_moe", "qwen2moe"


def read_config(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    return ModelArgs(
        model_type=MODEL_TYPE,
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=bool(config.get("norm_topk_prob", False))),
        attention=AttentionArgs(attention_bias=bool(config.get("qkv_bias", True))),
        shared_experts=SharedExpertArgs(
            shared_expert_intermediate_size=require(config, "shared_expert_intermediate_size")),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    return ModelArgs(model_type=MODEL_TYPE, **common_fields(key), router=RouterArgs(norm_topk_prob=False))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, check_convertible=renormalising_moe(ARCH, False)),
    examples=("Qwen1.5-MoE-A2.7B", "Qwen2-57B-A14B"),
    layers="MHA/GQA with q/k/v biases; softmax router; one shared expert behind a sigmoid gate",
)
