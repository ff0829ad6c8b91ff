"""Gemma 4 MoE (model_type "gemma4", the 26B-A4B): the sandwich-norm decoder (engine.model.sandwich). Five sliding-
window layers to one full-attention layer; the full layers have wider heads, fewer key/value heads whose keys are
also the values, and a RoPE of their own (transformers' "proportional": a quarter of the pairs turn). Every layer
runs a dense GELU MLP beside 128 experts (top-8, GELU-gated) routed from its input by a scaled router. The published
checkpoints are vision-language models: Wisp runs their language model (text_config; tensors under
model.language_model.*, engine.model.checkpoint) and says that images are not supported. Gemma 4's smaller models
(per-layer embeddings, shared KV layers, no experts) are refused by name."""

from dataclasses import dataclass, replace

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require
from engine.model.families.family import Family
from engine.model.families.multimodal_config import IMAGES_UNSUPPORTED, text_config
from engine.model.published_configs import GEMMA_4_26B_A4B
from engine.model.sandwich_args import SandwichArgs
from engine.model.weight_names import MoeWeightNames

MODEL_TYPE = "gemma4"
LAYER_KINDS = ("sliding_attention", "full_attention")


@dataclass(frozen=True)
class Gemma4WeightNames(MoeWeightNames):
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


WEIGHT_NAMES = Gemma4WeightNames(block="", router="router.proj", gate="gate_proj", up="up_proj", down="down_proj")


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


def read_config(config: dict) -> ModelArgs:
    text = text_config(config)
    refuse_unsupported(text)
    num_layers = require(text, "num_hidden_layers")
    kinds = layer_kinds(text, num_layers)
    top_k = require(text, "top_k_experts")
    fields = common_args({**text, "num_experts_per_tok": top_k}, require(text, "num_experts"), 10_000.0)
    fields.update(model_type=MODEL_TYPE, moe_intermediate_size=require(text, "moe_intermediate_size"),
                  intermediate_size=require(text, "intermediate_size"), norm_topk_prob=True, layer_types=kinds,
                  sliding_window=require(text, "sliding_window"), expert_activation="gelu_tanh_glu",
                  attention_scale=1.0, sandwich=sandwich_args(text, kinds))
    fields["rope_theta"] = fields["sandwich"].sliding_rope_theta
    args = ModelArgs(**fields)
    if config.get("vision_config") or config.get("audio_config"):
        args = replace(args, extra={"warning": IMAGES_UNSUPPORTED})
    return args


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    examples=("gemma-4-26B-A4B",),
    layers="sliding-window and wider full attention (keys as values), a dense GELU MLP beside 128 experts top-8, "
           "sandwich norms, soft-capped logits (the language model of the vision-language checkpoint)",
    shapes={"gemma-4-26b-a4b": GEMMA_4_26B_A4B},
)
