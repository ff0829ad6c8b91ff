"""Nemotron-H (model_type "nemotron_h"; llama.cpp "nemotron_h_moe"), e.g. Nemotron 3 Nano: one block per layer, as
hybrid_override_pattern (or layers_block_type) lays them out: Mamba-2 ("M", engine.model.mamba2_mixer), GQA without
RoPE ("*"), the latent MoE block ("E", engine.model.latent_moe: DeepSeek-V3-style sigmoid routing with a correction
bias, non-gated ReLU² experts in a latent space, a ReLU² shared expert) or a dense ReLU² MLP ("-"). Each block is
x + block(norm(x)); the checkpoints name the model "backbone" and every block "mixer". Its GGUF files are llama.cpp's
nemotron_h_moe (engine.model.families.nemotron_h_gguf)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.expert_args import ExpertArgs
from engine.model.families import nemotron_h_gguf
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys
from engine.model.mamba2_args import Mamba2Args
from engine.model.published_configs import NEMOTRON_3_NANO_30B_A3B
from engine.model.router_args import RouterArgs
from engine.model.shared_expert_args import SharedExpertArgs
from engine.model.weight_names import MoeWeightNames

MODEL_TYPE = "nemotron_h"
# hybrid_override_pattern's letters and layers_block_type's names (transformers' and the published ones) -> Wisp's
# layer types (engine.model.hybrid)
BLOCK_KINDS = {"M": "mamba", "*": "full_attention", "E": "moe", "-": "mlp",
               "mamba": "mamba", "linear_attention": "mamba", "attention": "full_attention",
               "full_attention": "full_attention", "moe": "moe", "mlp": "mlp"}
RENAMES = ((".self_attn.", ".mixer."), (".mlp.shared.", ".mixer.shared_experts."), (".mlp.", ".mixer."))


@dataclass(frozen=True)
class BackboneWeightNames(MoeWeightNames):
    """The checkpoints' names: everything under "backbone.", each layer's block under "mixer."."""

    def checkpoint_name(self, param: str) -> str:
        if param.startswith("lm_head"):
            return param
        if param.startswith("embed_tokens."):
            return "backbone.embeddings." + param.removeprefix("embed_tokens.")
        if param.startswith("norm."):
            return "backbone.norm_f." + param.removeprefix("norm.")
        for ours, theirs in RENAMES:
            param = param.replace(ours, theirs)
        return "backbone." + param

    def router_weight(self, layer: int) -> str:
        return f"backbone.layers.{layer}.mixer.gate.weight"

    def expert_weight(self, layer: int, expert: int, projection: str) -> str:
        return f"backbone.layers.{layer}.mixer.experts.{expert}.{projection}.weight"

    def fused_weight(self, layer: int, name: str) -> str:
        return f"backbone.layers.{layer}.mixer.experts.{name}"


# a non-gated expert's up rows stand for both halves of Wisp's gate_up block (engine.experts.formats.activation)
WEIGHT_NAMES = BackboneWeightNames(block="mixer", router="gate", gate="up_proj", up="up_proj", down="down_proj")


def layer_types(config: dict) -> tuple[str, ...]:
    blocks = first_present(config, "layers_block_type", "hybrid_override_pattern")
    if blocks is None:
        raise ModelFormatError("config.json: required field 'hybrid_override_pattern' (or 'layers_block_type') is "
                               "missing")
    if any(block not in BLOCK_KINDS for block in blocks):
        raise ModelFormatError(f"config.json: unknown layer kinds in {blocks!r} (known: M, *, E, -)")
    return tuple(BLOCK_KINDS[block] for block in blocks)


def time_step_limit(config: dict) -> tuple[float, float]:
    """transformers writes infinity as {"__float__": "Infinity"}."""
    limit = first_present(config, "time_step_limit", "mamba_dt_limit", default=(0.0, float("inf")))
    return tuple(float(v["__float__"]) if isinstance(v, dict) else float(v) for v in limit)


def mamba_args(config: dict) -> Mamba2Args:
    return Mamba2Args(
        num_heads=require(config, "mamba_num_heads"), head_dim=require(config, "mamba_head_dim"),
        state_size=require(config, "ssm_state_size"),
        n_groups=first_present(config, "n_groups", "mamba_n_groups", default=8),
        conv_kernel_dim=first_present(config, "conv_kernel", "mamba_d_conv", default=4),
        chunk_size=first_present(config, "chunk_size", "mamba_chunk_size", default=128),
        conv_bias=bool(first_present(config, "use_conv_bias", "mamba_conv_bias", default=True)),
        proj_bias=bool(config.get("use_bias", False)), time_step_limit=time_step_limit(config))


def check_supported(config: dict) -> None:
    for key, expected in (("mlp_hidden_act", "relu2"), ("mamba_hidden_act", "silu")):
        if config.get(key, expected) != expected:
            raise UnsupportedModelError(f"config.json: {key} '{config[key]}' is not supported for nemotron_h "
                                        f"(only {expected})")
    for key in ("attention_bias", "mlp_bias"):
        if config.get(key):
            raise UnsupportedModelError(f"config.json: {key} is not supported for nemotron_h")


def read_config(config: dict) -> ModelArgs:
    check_supported(config)
    types = layer_types(config)
    num_experts = require(config, "n_routed_experts")
    fields = common_args(dict(config, num_hidden_layers=len(types)), num_experts, default_theta=10000.0)
    fields.update(rms_norm_eps=float(config.get("layer_norm_epsilon", 1e-5)),
                  moe_layers=tuple(kind == "moe" for kind in types))
    return ModelArgs(
        model_type=MODEL_TYPE,
        **fields,
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=bool(config.get("norm_topk_prob", True)), kind="grouped",
                          topk_method="noaux_tc", n_group=config.get("n_group") or 1,
                          topk_group=config.get("topk_group") or 1,
                          routed_scaling_factor=float(config.get("routed_scaling_factor") or 1.0)),
        shared_experts=SharedExpertArgs(
            shared_expert_intermediate_size=config.get("moe_shared_expert_intermediate_size") or 0),
        experts=ExpertArgs(activation="relu_squared", latent_size=config.get("moe_latent_size") or 0),
        attention=AttentionArgs(partial_rotary_factor=0.0),  # no RoPE: hybrid_layers.UnrotatedAttention
        layer_types=types,
        mamba=mamba_args(config),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    return read_config(nemotron_h_gguf.config(key))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=GgufFormat(arch="nemotron_h_moe", read_metadata=read_gguf, layer_modules=nemotron_h_gguf.LAYER_MODULES,
                    layer_params=nemotron_h_gguf.LAYER_PARAMS, joined=nemotron_h_gguf.JOINED,
                    f32_tensors=nemotron_h_gguf.F32_TENSORS, check_convertible=nemotron_h_gguf.check_convertible,
                    write_metadata=nemotron_h_gguf.write_metadata, write_layer_keys=nemotron_h_gguf.write_layer_keys,
                    module_order=True, expert_specs=nemotron_h_gguf.expert_specs, trailing_layers=True),
    examples=("Nemotron-3-Nano-30B-A3B",),
    layers=("hybrid, one block per layer: Mamba-2, GQA without RoPE, latent MoE (sigmoid router with correction "
            "bias, ReLU² experts, shared expert), dense ReLU² MLP"),
    shapes={"nemotron-3-nano-30b-a3b": NEMOTRON_3_NANO_30B_A3B},
)
