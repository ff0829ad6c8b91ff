"""gpt-oss (model_type "gpt_oss"; llama.cpp "gpt-oss"): sliding-window and full attention layers with learned sinks
and q/k/v/o biases, YaRN RoPE, a biased router (top-k, then softmax over the k: engine.model.routers.TopKSoftmax),
and experts with biases and a clamped SwiGLU (engine.experts.formats.activation).

Hugging Face folders, bf16 or with MXFP4 experts (quantization_config; engine.quant.mxfp4_checkpoint): each layer's
experts are stacked: gate_up_proj [E, D, 2I] with gate and up interleaved column by column (gate at even columns),
down_proj [E, I, D], and their biases gate_up_proj_bias [E, 2I] (interleaved alike) and down_proj_bias [E, D].
Packing turns them into Wisp's block ([gate | up | down], rows of out features) and bias rows ([gate | up]); a
permutation of columns, so no value changes (engine.model.interleaved_experts).

GGUF files, as llama.cpp's graph (src/models/openai-moe.cpp) and converter (conversion/gpt_oss.py) have them:
- Attention: q/k/v/o biases, learned sinks (blk.N.attn_sinks.weight [heads]), a sliding window on the layers
  `attention.sliding_window_pattern` names (an array of bools, or a period: by default every even layer), YaRN RoPE.
- The norm before the experts is blk.N.post_attention_norm (ffn_norm in the other architectures).
- Router: ffn_gate_inp with a bias; softmax over the top-k logits.
- Experts: ffn_{gate,up,down}_exps with biases ([E, I], [E, I], [E, D]), llama.cpp's swiglu_oai with its fixed
  constants (alpha 1.702, limit 7), experts usually MXFP4: an MXFP4 checkpoint's experts are written MXFP4 as they
  are (only the bytes move: engine.quant.mxfp4_hf), a dense checkpoint's converted to the file's type."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.checkpoint_quant import expert_quant
from engine.model.expert_args import ExpertArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import renormalising_moe
from engine.model.families.gguf_keys import GgufKeys, common_fields
from engine.model.families.tensor_spec import TensorSpec, as_f32
from engine.model.published_configs import GPT_OSS_20B
from engine.model.router_args import RouterArgs
from engine.model.weight_names import MoeWeightNames
from engine.model.yarn_config import Yarn, yarn_mscale
from engine.quant.types import MXFP4

MODEL_TYPE, ARCH = "gpt_oss", "gpt-oss"
WEIGHT_NAMES = MoeWeightNames(block="mlp", router="router", gate="gate_proj", up="up_proj", down="down_proj")
LAYER_TYPES = ("sliding_attention", "full_attention")
# transformers' GptOssConfig default when a config names no RoPE parameters
DEFAULT_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0  # llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants (not in the metadata)
ROUTER = RouterArgs(norm_topk_prob=False, kind="topk_softmax", bias=True)
GGUF_LAYER_MODULES = {"post_attention_layernorm": "post_attention_norm"}


def layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    """Published configs list them; without the list, transformers alternates sliding (even layers) and full."""
    types = config.get("layer_types")
    if types is None:
        return tuple(LAYER_TYPES[i % 2] for i in range(num_layers))
    if not isinstance(types, list) or len(types) != num_layers or any(t not in LAYER_TYPES for t in types):
        raise ModelFormatError(f"config.json: 'layer_types' must list {num_layers} entries, each one of "
                               f"{', '.join(LAYER_TYPES)}")
    return tuple(types)


def read_config(config: dict) -> ModelArgs:
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
        model_type=MODEL_TYPE,
        **common_args(config, num_experts, default_theta=150000.0, scaling_types=("yarn",)),
        moe_intermediate_size=intermediate,
        intermediate_size=intermediate,
        router=ROUTER,
        layer_types=layer_types(config, require(config, "num_hidden_layers")),
        attention=AttentionArgs(attention_bias=bias, o_proj_bias=bias, attention_sinks=True, sliding_window=window),
        experts=ExpertArgs(activation="clamped_swiglu", bias=True, quant=expert_quant(config),
                           swiglu_alpha=float(config.get("swiglu_alpha", 1.702)),
                           swiglu_limit=float(config.get("swiglu_limit", 7.0))),
        norm_weight_fp32=True,
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    layers = gguf_layer_types(key, key.integer("block_count"))
    common = common_fields(key, reads_rope_scaling=True, attention_sinks=True, layer_types=layers,
                           sliding_window=key.integer("attention.sliding_window"))
    return ModelArgs(
        model_type=MODEL_TYPE,
        **common,
        rope_scaling=gguf_yarn(key),
        router=ROUTER,
        experts=ExpertArgs(activation="clamped_swiglu", bias=True, swiglu_alpha=SWIGLU_ALPHA,
                           swiglu_limit=SWIGLU_LIMIT),
        norm_weight_fp32=True,
    )


def gguf_layer_types(key: GgufKeys, num_layers: int) -> tuple[str, ...]:
    """llama.cpp's load_swa_pattern(2): a per-layer bool array, or a period n (layer i slides when i % n < n - 1)."""
    pattern = key.get("attention.sliding_window_pattern", 2)
    if isinstance(pattern, (list, np.ndarray)):
        if len(pattern) != num_layers:
            raise ModelFormatError(f"{key.path}: {ARCH}.attention.sliding_window_pattern has {len(pattern)} "
                                   f"entries for {num_layers} layers")
        sliding = [bool(x) for x in pattern]
    else:
        period = int(pattern)
        sliding = [period == 0 or i % period < period - 1 for i in range(num_layers)]
    return tuple("sliding_attention" if s else "full_attention" for s in sliding)


def gguf_yarn(key: GgufKeys) -> Yarn | None:
    """YaRN as llama.cpp applies it: correction dimensions always floored and ceiled (ggml_rope_yarn_corr_dims), and
    the attention factor yarn_attn_factor (default 1) times 1 + 0.1 ln(factor)."""
    kind = key.get("rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind != "yarn":
        raise ModelFormatError(f"{key.path}: {ARCH} with RoPE scaling '{kind}': llama.cpp's gpt-oss uses yarn")
    factor = key.number("rope.scaling.factor")
    attn_factor = key.get("rope.scaling.yarn_attn_factor")
    return Yarn(
        factor=factor,
        original_max_position_embeddings=key.integer("rope.scaling.original_context_length"),
        beta_fast=key.number("rope.scaling.yarn_beta_fast", 32.0),
        beta_slow=key.number("rope.scaling.yarn_beta_slow", 1.0),
        truncate=True,
        attention_factor=None if attn_factor is None else float(attn_factor) * yarn_mscale(factor),
    )


def check_convertible(args: ModelArgs) -> None:
    """Refuses SwiGLU constants other than the ones llama.cpp's graph fixes."""
    renormalising_moe(ARCH, False)(args)
    experts = args.experts
    if (experts.swiglu_alpha, experts.swiglu_limit) != (SWIGLU_ALPHA, SWIGLU_LIMIT):
        raise UnsupportedModelError(
            f"gpt_oss with swiglu_limit {experts.swiglu_limit} and alpha {experts.swiglu_alpha}: llama.cpp's gpt-oss "
            f"graph fixes them at {SWIGLU_LIMIT} and {SWIGLU_ALPHA}, so its GGUF would compute a different model")


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys llama.cpp's gpt-oss reads beyond the shared ones: the sliding window and YaRN."""
    import gguf

    writer.add_sliding_window(args.attention.sliding_window)
    yarn = args.rope_scaling
    if yarn is not None:
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(yarn.factor)
        writer.add_rope_scaling_orig_ctx_len(yarn.original_max_position_embeddings)
        writer.add_rope_scaling_yarn_beta_fast(yarn.beta_fast)
        writer.add_rope_scaling_yarn_beta_slow(yarn.beta_slow)


def gguf_expert_specs(args: ModelArgs, ckpt, names: MoeWeightNames, layer: int) -> list[TensorSpec]:
    """One MoE layer's experts and their biases, from the stacked interleaved checkpoint tensors."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    blk = f"blk.{layer}."

    def bias(column: int):  # gate_up_proj_bias [E, 2I]: gate at even columns
        return lambda: np.ascontiguousarray(as_f32(ckpt.get(names.fused_weight(layer, "gate_up_proj_bias"),
                                                            (E, 2 * I)))[:, column::2])

    down_bias = lambda: as_f32(ckpt.get(names.fused_weight(layer, "down_proj_bias"), (E, D)))  # noqa: E731
    specs = [TensorSpec(blk + "ffn_gate_exps.bias", (E, I), bias(0), True),
             TensorSpec(blk + "ffn_up_exps.bias", (E, I), bias(1), True),
             TensorSpec(blk + "ffn_down_exps.bias", (E, D), down_bias, True)]
    shapes = {"gate": (E, I, D), "up": (E, I, D), "down": (E, D, I)}
    if args.experts.quant:
        return specs + [TensorSpec(f"{blk}ffn_{p}_exps.weight", shape, _mxfp4(args, ckpt, names, layer, p),
                                   raw_type=MXFP4.ggml_id) for p, shape in shapes.items()]
    return specs + [TensorSpec(f"{blk}ffn_{p}_exps.weight", shape, _dense(args, ckpt, names, layer, p))
                    for p, shape in shapes.items()]


def _dense(args, ckpt, names, layer: int, projection: str):
    """One projection of every expert, f32 [E, out, in]."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size

    def load() -> np.ndarray:
        if projection == "down":
            down = as_f32(ckpt.get(names.fused_weight(layer, "down_proj"), (E, I, D)))
            return np.ascontiguousarray(down.swapaxes(1, 2))
        gate_up = as_f32(ckpt.get(names.fused_weight(layer, "gate_up_proj"), (E, D, 2 * I)))
        return np.ascontiguousarray(gate_up[:, :, 0 if projection == "gate" else 1 :: 2].swapaxes(1, 2))

    return load


def _mxfp4(args, ckpt, names, layer: int, projection: str):
    """One projection of every expert, ggml MXFP4 rows uint8 [E, out, bytes per row]."""

    def load() -> np.ndarray:
        from engine.quant.mxfp4_checkpoint import blocks_and_scales
        from engine.quant.mxfp4_hf import ggml_rows

        hf = "down_proj" if projection == "down" else "gate_up_proj"
        rows = ggml_rows(*blocks_and_scales(args, ckpt, names, layer, hf), hf)  # [E, out, bytes per row]
        if projection != "down":
            rows = rows[:, 0 if projection == "gate" else 1 :: 2]  # gate rows even, up rows odd
        return np.ascontiguousarray(rows.numpy())

    return load


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    reads_quantization=True,
    interleaved_experts=True,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, layer_modules=GGUF_LAYER_MODULES,
                    check_convertible=check_convertible, write_metadata=write_gguf_metadata,
                    module_order=True, expert_specs=gguf_expert_specs),
    examples=("gpt-oss-20b", "gpt-oss-120b"),
    layers=(
        "GQA alternating sliding-window and full layers, attention sinks, q/k/v/o biases, YaRN RoPE; biased "
        "top-k-then-softmax router; experts with biases and a clamped SwiGLU (MXFP4 experts stay MXFP4)"),
    shapes={"gpt-oss-20b": GPT_OSS_20B},
)
