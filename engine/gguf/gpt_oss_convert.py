"""`wisp convert-gguf` of a gpt_oss checkpoint: llama.cpp's "gpt-oss" tensors and metadata as its own converter
writes them (convert_hf_to_gguf.py, conversion/gpt_oss.py).

- gate_up_proj [E, D, 2I] (x @ W, gate at even columns) -> ffn_gate_exps and ffn_up_exps [E, I, D];
  down_proj [E, I, D] -> ffn_down_exps [E, D, I]; their biases split alike -> ffn_{gate,up,down}_exps.bias.
- An MXFP4 checkpoint's experts are written MXFP4 as they are (only the bytes move: engine.quant.mxfp4_hf),
  whatever the file's type; a dense checkpoint's are converted to it like any weight.
- Sinks, biases, norms and the router stay f32; the sliding window and YaRN go in the metadata."""

from __future__ import annotations

import numpy as np

from engine.errors import UnsupportedModelError
from engine.gguf.gpt_oss import ARCH, SWIGLU_ALPHA, SWIGLU_LIMIT
from engine.gguf.named_specs import dense_specs
from engine.gguf.tensor_map import TensorSpec, as_f32
from engine.quant.types import MXFP4

ALWAYS_F32 = ("ffn_gate_inp.weight",)  # llama.cpp keeps routers f32, and every tensor not named .weight


def gpt_oss_specs(args, ckpt, names) -> list[TensorSpec]:
    """Every tensor of the file: Wisp's dense parameters under llama.cpp's names, then each layer's experts.
    Refuses a checkpoint whose SwiGLU constants differ from the ones llama.cpp's graph fixes."""
    if (args.swiglu_alpha, args.swiglu_limit) != (SWIGLU_ALPHA, SWIGLU_LIMIT):
        raise UnsupportedModelError(
            f"gpt_oss with swiglu_limit {args.swiglu_limit} and alpha {args.swiglu_alpha}: llama.cpp's gpt-oss graph "
            f"fixes them at {SWIGLU_LIMIT} and {SWIGLU_ALPHA}, so its GGUF would compute a different model")
    specs = dense_specs(args, ckpt, names, ARCH, lambda name, shape: len(shape) == 1 or not name.endswith(".weight")
                        or name.endswith(ALWAYS_F32))
    for layer, is_moe in enumerate(args.moe_layers):
        specs += expert_specs(args, ckpt, names, layer) if is_moe else []
    return specs


def expert_specs(args, ckpt, names, layer: int) -> list[TensorSpec]:
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
    if args.expert_quant:
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


def write_gpt_oss_metadata(writer, args) -> None:
    """The keys llama.cpp's gpt-oss reads beyond the shared ones: the sliding window and YaRN."""
    import gguf

    writer.add_sliding_window(args.sliding_window)
    yarn = args.rope_scaling
    if yarn is not None:
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(yarn.factor)
        writer.add_rope_scaling_orig_ctx_len(yarn.original_max_position_embeddings)
        writer.add_rope_scaling_yarn_beta_fast(yarn.beta_fast)
        writer.add_rope_scaling_yarn_beta_slow(yarn.beta_slow)
