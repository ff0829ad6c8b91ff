"""config.json -> ModelArgs for the sandwich-norm MoE models (gemma4 and its text-only checkpoint, gemma4_text):
engine.model.sandwich's decoder, and the checkpoint names of its router and experts."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require
from engine.model.attention_args import AttentionArgs
from engine.model.expert_args import ExpertArgs
from engine.model.router_args import RouterArgs
from engine.model.sandwich_args import SandwichArgs
from engine.model.weight_names import MoeWeightNames

LAYER_KINDS = ("sliding_attention", "full_attention")


@dataclass(frozen=True)
class SandwichWeightNames(MoeWeightNames):
    """The router (proj, scale, per_expert_scale) and the stacked experts sit in the decoder layer itself, and
    Wisp's modules keep the checkpoint's names."""

    def checkpoint_name(self, param: str) -> str:
        return param if param.startswith("lm_head") else "model." + param

    def router_weight(self, layer: int) -> str:
        return f"model.layers.{layer}.router.proj.weight"

    def expert_weight(self, layer: int, expert: int, projection: str) -> str:
        return f"model.layers.{layer}.experts.{expert}.{projection}.weight"

    def fused_weight(self, layer: int, name: str) -> str:
        return f"model.layers.{layer}.experts.{name}"


WEIGHT_NAMES = SandwichWeightNames(block="", router="router.proj", gate="gate_proj", up="up_proj", down="down_proj")


def refuse_unsupported(text: dict) -> None:
    """The Gemma 4 features Wisp does not compute, by name."""
    if not text.get("enable_moe_block"):
        raise UnsupportedModelError("this Gemma 4 model has no experts (enable_moe_block is off); Wisp runs the MoE "
                                    "model (gemma-4-26B-A4B)")
    if text.get("hidden_size_per_layer_input"):
        raise UnsupportedModelError("config.json: Gemma 4's per-layer embeddings (hidden_size_per_layer_input) are not "
                                    "supported")
    if text.get("num_kv_shared_layers"):
        raise UnsupportedModelError("config.json: Gemma 4's shared KV layers (num_kv_shared_layers) are not supported")
    if text.get("use_bidirectional_attention") == "all":
        raise UnsupportedModelError("config.json: bidirectional attention (use_bidirectional_attention 'all') is not "
                                    "supported")
    if text.get("attention_bias"):
        raise UnsupportedModelError("config.json: attention biases (attention_bias) are not supported for gemma4")
    activation = text.get("hidden_activation", "gelu_pytorch_tanh")
    if activation != "gelu_pytorch_tanh":
        raise UnsupportedModelError(f"config.json: hidden_activation '{activation}' is not supported for gemma4 "
                                    "(only gelu_pytorch_tanh)")


def layer_kinds(text: dict, num_layers: int) -> tuple[str, ...]:
    """layer_types, the last layer full as transformers forces it (by default five sliding layers to one full)."""
    kinds = text.get("layer_types") or [LAYER_KINDS[(i + 1) % 6 == 0] for i in range(num_layers)]
    if len(kinds) != num_layers or any(kind not in LAYER_KINDS for kind in kinds):
        raise ModelFormatError(f"config.json: layer_types must list {num_layers} of {' or '.join(LAYER_KINDS)}")
    return (*kinds[:-1], "full_attention")


def full_layer_shape(text: dict, kinds: tuple[str, ...]) -> tuple[int, int]:
    """(kv heads, head dim) of the full layers: transformers' saved per_layer_config, or the published
    global_head_dim and num_global_key_value_heads (the latter only with attention_k_eq_v, as transformers reads it)."""
    kv_heads, head_dim = text.get("num_key_value_heads"), text.get("head_dim")
    overrides = text.get("per_layer_config")
    if overrides:
        shapes = {(layer.get("num_key_value_heads", kv_heads), layer.get("head_dim", head_dim))
                  for index, layer in overrides.items() if kinds[int(index)] == "full_attention"}
        sliding = [layer for index, layer in overrides.items() if kinds[int(index)] != "full_attention"]
        if len(shapes) != 1 or sliding:
            raise UnsupportedModelError("config.json: per_layer_config must give every full-attention layer one shape "
                                        "and no sliding layer another")
        return shapes.pop()
    full_kv = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v", True) else None
    return full_kv or kv_heads, text.get("global_head_dim") or 512


def rope_of(text: dict, kind: str, default_theta: float) -> dict:
    params = (text.get("rope_parameters") or {}).get(kind) or {"rope_theta": default_theta}
    rope_type = params.get("rope_type", "default")
    if rope_type not in ("default", "proportional") or params.get("factor", 1.0) != 1.0:
        raise UnsupportedModelError(f"config.json: {kind} RoPE '{rope_type}' is not supported for gemma4 (only default "
                                    "or proportional without a factor)")
    return params


def sandwich_args(text: dict, kinds: tuple[str, ...]) -> SandwichArgs:
    full_kv_heads, full_head_dim = full_layer_shape(text, kinds)
    sliding, full = rope_of(text, "sliding_attention", 10_000.0), rope_of(text, "full_attention", 1_000_000.0)
    proportional = full.get("rope_type") == "proportional"
    cap = text.get("final_logit_softcapping")
    return SandwichArgs(
        full_head_dim=full_head_dim, full_kv_heads=full_kv_heads,
        full_keys_are_values=bool(text.get("attention_k_eq_v", False)),
        sliding_rope_theta=float(sliding.get("rope_theta", 10_000.0)),
        full_rope_theta=float(full.get("rope_theta", 1_000_000.0)),
        full_rope_fraction=float(full.get("partial_rotary_factor", 1.0)) if proportional else 1.0,
        logit_softcap=float(cap) if cap else None,
    )


def sandwich_model_args(text: dict, model_type: str) -> ModelArgs:
    """A Gemma 4 language model's config (text_config of the vision-language checkpoint) -> ModelArgs."""
    refuse_unsupported(text)
    num_layers = require(text, "num_hidden_layers")
    kinds = layer_kinds(text, num_layers)
    top_k = require(text, "top_k_experts")
    fields = common_args({**text, "num_experts_per_tok": top_k}, require(text, "num_experts"), 10_000.0)
    fields.update(model_type=model_type, moe_intermediate_size=require(text, "moe_intermediate_size"),
                  intermediate_size=require(text, "intermediate_size"), router=RouterArgs(norm_topk_prob=True),
                  layer_types=kinds, experts=ExpertArgs(activation="gelu_tanh_glu"),
                  attention=AttentionArgs(sliding_window=require(text, "sliding_window"), attention_scale=1.0),
                  sandwich=sandwich_args(text, kinds))
    fields["rope_theta"] = fields["sandwich"].sliding_rope_theta
    return ModelArgs(**fields)
