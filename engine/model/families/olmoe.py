"""OLMoE (model_type "olmoe"; llama.cpp "olmoe"): q/k RMSNorm over the whole projection, optional clip_qkv;
llama.cpp's graph never renormalises the top-k router weights."""

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import experts_in_every_layer, fixed_renormalisation
from engine.model.families.gguf_keys import GgufKeys, common_fields
from engine.model.router_args import RouterArgs
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "olmoe", "olmoe"


def read_config(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    intermediate = require(config, "intermediate_size")
    return ModelArgs(
        model_type=MODEL_TYPE,
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        router=RouterArgs(norm_topk_prob=bool(config.get("norm_topk_prob", False))),
        attention=AttentionArgs(attention_bias=bool(config.get("attention_bias", False)),
                                o_proj_bias=bool(config.get("attention_bias", False)), qk_norm="full",
                                clip_qkv=config.get("clip_qkv")),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    return ModelArgs(model_type=MODEL_TYPE, **common_fields(key, qk_norm="full"),
                     router=RouterArgs(norm_topk_prob=False))


def check_convertible(args: ModelArgs) -> None:
    fixed_renormalisation(args, ARCH, False)
    if args.num_key_value_heads != args.num_attention_heads:
        raise UnsupportedModelError("llama.cpp's olmoe normalises k over the full hidden size, so it cannot run an "
                                    "OLMoE checkpoint with grouped-query attention (num_key_value_heads < heads)")
    experts_in_every_layer(args, ARCH)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, check_convertible=check_convertible),
    examples=("OLMoE-1B-7B",),
    layers="MHA with q/k norm over the full projection; softmax router, top-k not renormalised",
)
