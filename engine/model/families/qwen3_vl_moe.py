"""Qwen3-VL-MoE (model_type "qwen3_vl_moe"): a vision-language checkpoint whose language model is Qwen3-MoE's (per-head
q/k norm, softmax router, always-renormalised top-k) under config's text_config and model.language_model.*, with
interleaved M-RoPE (mrope_section; engine.model.mrope). Its vision tower (engine.vision) also hands "deepstack"
features of some of its blocks to the language model's first layers, added at the image tokens."""

from dataclasses import replace

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family
from engine.model.families.vision_language import text_config
from engine.model.router_args import RouterArgs
from engine.model.weight_names import QWEN_STYLE
from engine.vision.vision_args import vision_sizes

MODEL_TYPE = "qwen3_vl_moe"
DEFAULT_MROPE_SECTION = [24, 20, 20]  # transformers' Qwen3VLMoeTextRotaryEmbedding default


def read_config(config: dict) -> ModelArgs:
    text = text_config(config)
    num_experts = require({"num_experts": first_present(text, "num_experts", "num_local_experts")}, "num_experts")
    args = ModelArgs(
        model_type=MODEL_TYPE,
        **common_args(text, num_experts, default_theta=500000.0),
        moe_intermediate_size=require(text, "moe_intermediate_size"),
        intermediate_size=text.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=True),  # its router always renormalises the top-k weights
        attention=AttentionArgs(attention_bias=bool(text.get("attention_bias", False)),
                                o_proj_bias=bool(text.get("attention_bias", False)), qk_norm="per_head"),
    )
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    extra = {"mrope_section": list(rope.get("mrope_section") or DEFAULT_MROPE_SECTION),
             **vision_sizes(config, args.vocab_size)}
    return replace(args, extra={**args.extra, **extra})


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    examples=("Qwen3-VL-30B-A3B", "Qwen3-VL-235B-A22B"),
    layers="as qwen3_moe, with interleaved M-RoPE and deepstack image features (the vision-language checkpoint)",
)
