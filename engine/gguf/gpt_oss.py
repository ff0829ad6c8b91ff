"""gpt-oss GGUF files (llama.cpp architecture "gpt-oss") on Wisp's engine: what its metadata and tensors add to the
shared GGUF reading, as llama.cpp's graph (src/models/openai-moe.cpp) computes the model.

- Attention: q/k/v/o biases, learned sinks (blk.N.attn_sinks.weight [heads]), a sliding window on the layers
  `attention.sliding_window_pattern` names (an array of bools, or a period: by default every even layer), YaRN RoPE.
- The norm before the experts is blk.N.post_attention_norm (ffn_norm in the other architectures).
- Router: ffn_gate_inp with a bias; softmax over the top-k logits.
- Experts: ffn_{gate,up,down}_exps with biases ([E, I], [E, I], [E, D]), llama.cpp's swiglu_oai with its fixed
  constants (alpha 1.702, limit 7), experts usually MXFP4."""

from __future__ import annotations

import numpy as np
import torch

from engine.errors import ModelFormatError
from engine.experts.formats.activation import ExpertBias
from engine.model.yarn_config import Yarn, yarn_mscale

ARCH = "gpt-oss"
MODEL_TYPE = "gpt_oss"
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0  # llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants (not in the metadata)
LAYER_MODULES = {"post_attention_layernorm": "post_attention_norm"}
EXPERT_BIASES = {"gate": "ffn_gate_exps.bias", "up": "ffn_up_exps.bias", "down": "ffn_down_exps.bias"}


def gpt_oss_fields(file, key, num_layers: int) -> dict:
    """The ModelArgs fields of a gpt-oss file beyond the shared ones (key: model_args._Keys)."""
    return dict(
        layer_types=layer_types(file, num_layers),
        sliding_window=key.integer("attention.sliding_window"),
        rope_scaling=yarn(file, key),
        attention_sinks=True,
        router="topk_softmax",
        router_bias=True,
        expert_bias=True,
        expert_activation="clamped_swiglu",
        swiglu_alpha=SWIGLU_ALPHA,
        swiglu_limit=SWIGLU_LIMIT,
        norm_weight_fp32=True,
    )


def layer_types(file, num_layers: int) -> tuple[str, ...]:
    """llama.cpp's load_swa_pattern(2): a per-layer bool array, or a period n (layer i slides when i % n < n - 1)."""
    pattern = file.get(f"{ARCH}.attention.sliding_window_pattern", 2)
    if isinstance(pattern, (list, np.ndarray)):
        if len(pattern) != num_layers:
            raise ModelFormatError(f"{file.path}: {ARCH}.attention.sliding_window_pattern has {len(pattern)} "
                                   f"entries for {num_layers} layers")
        sliding = [bool(x) for x in pattern]
    else:
        period = int(pattern)
        sliding = [period == 0 or i % period < period - 1 for i in range(num_layers)]
    return tuple("sliding_attention" if s else "full_attention" for s in sliding)


def yarn(file, key) -> Yarn | None:
    """YaRN as llama.cpp applies it: correction dimensions always floored and ceiled (ggml_rope_yarn_corr_dims), and
    the attention factor yarn_attn_factor (default 1) times 1 + 0.1 ln(factor)."""
    kind = file.get(f"{ARCH}.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind != "yarn":
        raise ModelFormatError(f"{file.path}: {ARCH} with RoPE scaling '{kind}': llama.cpp's gpt-oss uses yarn")
    factor = key.number("rope.scaling.factor")
    attn_factor = file.get(f"{ARCH}.rope.scaling.yarn_attn_factor")
    return Yarn(
        factor=factor,
        original_max_position_embeddings=key.integer("rope.scaling.original_context_length"),
        beta_fast=key.number("rope.scaling.yarn_beta_fast", 32.0),
        beta_slow=key.number("rope.scaling.yarn_beta_slow", 1.0),
        truncate=True,
        attention_factor=None if attn_factor is None else float(attn_factor) * yarn_mscale(factor),
    )


def bias_names(layer: int) -> dict[str, str]:
    return {projection: f"blk.{layer}.{name}" for projection, name in EXPERT_BIASES.items()}


def expert_biases(model, dtype: torch.dtype, device) -> dict[int, ExpertBias]:
    """{MoE layer: ExpertBias} from the file's exps biases, on the compute device in the compute dtype; gate_up is
    [gate | up] as the slot's gate_up rows."""
    biases = {}
    for layer, is_moe in enumerate(model.args.moe_layers):
        if not is_moe:
            continue
        tensors = {p: model.dense_tensor(name) for p, name in bias_names(layer).items()}
        gate, up, down = (tensors[p].dequantize(torch.float32) for p in ("gate", "up", "down"))
        biases[layer] = ExpertBias(gate_up=torch.cat([gate, up], dim=-1).to(device=device, dtype=dtype),
                                   down=down.to(device=device, dtype=dtype))
    return biases
