"""Qwen3-MoE (model_type "qwen3_moe"; llama.cpp "qwen3moe"): per-head q/k RMSNorm, softmax router, optional
top-k renormalisation (always on in llama.cpp's graph). The published checkpoints carry no draft layer; a fine-tune
may add one in Qwen's `mtp.*` layout with `mtp_num_hidden_layers` in config.json (the bundled demo does, in its own
mtp.safetensors), read only for --speculative mtp/auto."""

from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import renormalising_moe
from engine.model.families.gguf_keys import GgufKeys, common_fields
from engine.model.mtp_names import MTP
from engine.model.router_args import RouterArgs
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "qwen3_moe", "qwen3moe"


def read_config(config: dict) -> ModelArgs:
    num_experts = require({"num_experts": first_present(config, "num_experts", "num_local_experts")}, "num_experts")
    return ModelArgs(
        model_type=MODEL_TYPE,
        **common_args(config, num_experts, default_theta=10000.0),
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=bool(config.get("norm_topk_prob", False))),
        attention=AttentionArgs(attention_bias=bool(config.get("attention_bias", False)),
                                o_proj_bias=bool(config.get("attention_bias", False)), qk_norm="per_head"),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    return ModelArgs(model_type=MODEL_TYPE, **common_fields(key, qk_norm="per_head"),
                     router=RouterArgs(norm_topk_prob=True))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, check_convertible=renormalising_moe(ARCH, True)),
    examples=("Qwen3-30B-A3B", "Qwen3-Coder-30B-A3B"),
    draft_layer=MTP,  # a fine-tune's multi-token-prediction layer, read for --speculative mtp/auto
    layers="GQA with per-head q/k norm; softmax router, renormalised top-k",
)
