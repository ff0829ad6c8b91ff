"""gpt-oss (model_type "gpt_oss") from a Hugging Face folder in its bf16 form: sliding-window and full attention
layers with learned sinks and q/k/v/o biases, YaRN RoPE, a biased router (top-k, then softmax over the k), and
experts with biases and a clamped SwiGLU.

The checkpoint stacks each layer's experts: gate_up_proj [E, D, 2I] with gate and up interleaved column by column
(gate at even columns), down_proj [E, I, D], and their biases gate_up_proj_bias [E, 2I] (interleaved alike) and
down_proj_bias [E, D]. Packing turns them into Wisp's block ([gate | up | down], rows of out features) and bias
rows ([gate | up]); a permutation of columns, so no value changes."""

from __future__ import annotations

from engine.errors import ModelFormatError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.checkpoint_quant import expert_quant
from engine.model.weight_names import MoeWeightNames

WEIGHT_NAMES = MoeWeightNames(block="mlp", router="router", gate="gate_proj", up="up_proj", down="down_proj")
LAYER_TYPES = ("sliding_attention", "full_attention")
# transformers' GptOssConfig default when a config names no RoPE parameters
DEFAULT_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    """Published configs list them; without the list, transformers alternates sliding (even layers) and full."""
    types = config.get("layer_types")
    if types is None:
        return tuple(LAYER_TYPES[i % 2] for i in range(num_layers))
    if not isinstance(types, list) or len(types) != num_layers or any(t not in LAYER_TYPES for t in types):
        raise ModelFormatError(f"config.json: 'layer_types' must list {num_layers} entries, each one of "
                               f"{', '.join(LAYER_TYPES)}")
    return tuple(types)


def model_args(config: dict) -> ModelArgs:
    num_experts = require({"num_local_experts": first_present(config, "num_local_experts", "num_experts")},
                          "num_local_experts")
    config = {**config, "num_experts_per_tok": first_present(config, "num_experts_per_tok", "experts_per_token")}
    if not (config.get("rope_parameters") or config.get("rope_scaling")):
        config["rope_scaling"] = DEFAULT_YARN
    intermediate = require(config, "intermediate_size")
    window = config.get("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise ModelFormatError(f"config.json: 'sliding_window' must be a positive integer, got {window!r}")
    bias = bool(config.get("attention_bias", True))
    return ModelArgs(
        model_type="gpt_oss",
        **common_args(config, num_experts, default_theta=150000.0, scaling_types=("yarn",)),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        norm_topk_prob=False,
        attention_bias=bias,
        o_proj_bias=bias,
        layer_types=layer_types(config, require(config, "num_hidden_layers")),
        sliding_window=window,
        attention_sinks=True,
        router="topk_softmax",
        router_bias=True,
        expert_bias=True,
        expert_activation="clamped_swiglu",
        swiglu_alpha=float(config.get("swiglu_alpha", 1.702)),
        swiglu_limit=float(config.get("swiglu_limit", 7.0)),
        norm_weight_fp32=True,
        expert_quant=expert_quant(config),
    )
