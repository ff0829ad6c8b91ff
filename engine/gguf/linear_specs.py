"""convert-gguf's dense tensors of a family whose GGUF layout differs from its checkpoints' (GgufFormat.file_args:
the hybrid linear-attention models, engine.model.families.hybrid_gguf): Wisp's parameters in the file's layout, in
Wisp's order, each computed from the checkpoint's tensors as llama.cpp's converter computes it:
- zero-centred norm weights (ZeroCenteredRMSNorm's) + 1; the DeltaNet's A = -exp(A_log);
- a checkpoint's fused in_proj_qkvz (per key head: q, k, v, z) split into q|k|v of all heads and z;
- with tiled value heads, every value-head dimension reordered from grouped by key head to tiled;
- size-1 dimensions dropped (a depthwise conv [C, 1, K] is [C, K], the shared expert's gate [1, D] is [D])."""

from __future__ import annotations

import numpy as np
import torch

from engine.gguf.named_specs import keeps_f32
from engine.gguf.param_names import gguf_name
from engine.model.args import ModelArgs
from engine.model.families.tensor_spec import TensorSpec, as_f32
from engine.model.linear_args import QKVZ_BA, LinearAttentionArgs
from engine.model.weight_names import MoeWeightNames


def transformed_specs(args: ModelArgs, file_args: ModelArgs, ckpt, names: MoeWeightNames, arch: str) -> list:
    """One spec per parameter of the model in the file's layout (file_args) from the checkpoint read as `args`; a
    tied lm_head is left out (llama.cpp reads token_embd)."""
    from engine.model.hybrid_layers import ZeroCenteredRMSNorm
    from engine.model.model_tree import meta_model

    model = meta_model(file_args)
    centred = {f"{prefix}.weight" for prefix, module in model.named_modules()
               if isinstance(module, ZeroCenteredRMSNorm)}
    tiled = file_args.linear.tiled_value_heads
    specs = []
    for param, value in model.named_parameters():
        if param == "lm_head.weight" and not ckpt.has(param):
            continue
        name = gguf_name(param, arch)
        shape = tuple(d for d in value.shape if d != 1) if value.dim() > 1 else tuple(value.shape)
        load = _loader(args.linear, ckpt, names, param, param in centred, tiled)
        specs.append(TensorSpec(name, shape, lambda load=load, shape=shape: load().reshape(shape),
                                keeps_f32(name, shape)))
    return specs


def _loader(linear: LinearAttentionArgs, ckpt, names: MoeWeightNames, param: str, centred: bool, tiled: bool):
    from engine.model.loader import hf_name

    def read(wisp_param: str) -> np.ndarray:
        return as_f32(ckpt.get(hf_name(wisp_param, names)))

    prefix, _, leaf = param.rpartition("linear_attn.")
    if centred:
        return lambda: read(param) + np.float32(1.0)
    if leaf == "A":
        base = lambda: decay_rate(read(f"{prefix}linear_attn.A_log"))  # noqa: E731
    elif leaf in ("in_proj_qkv.weight", "in_proj_z.weight") and linear.projections == QKVZ_BA:
        z = leaf.startswith("in_proj_z")
        base = lambda: split_qkvz(read(f"{prefix}linear_attn.in_proj_qkvz.weight"), linear)[z]  # noqa: E731
    else:
        base = lambda: read(param)  # noqa: E731
    if tiled and leaf and linear.num_value_heads != linear.num_key_heads:
        return lambda: tiled_heads(base(), leaf, linear)
    return base


def decay_rate(a_log: np.ndarray) -> np.ndarray:
    """-exp(A_log) with the bits Wisp's layer computes it with on the CPU (GatedDeltaNet.forward)."""
    return (-torch.from_numpy(a_log).float().exp()).numpy()


def split_qkvz(qkvz: np.ndarray, linear: LinearAttentionArgs) -> tuple[np.ndarray, np.ndarray]:
    """qwen3_next's in_proj_qkvz [Hk x (q Dk | k Dk | v r*Dv | z r*Dv), D] -> (q | k | v of all heads, z)."""
    ratio = linear.num_value_heads // linear.num_key_heads
    per_head = qkvz.reshape(linear.num_key_heads, -1, qkvz.shape[-1])
    q, k, v, z = np.split(per_head, np.cumsum([linear.key_head_dim, linear.key_head_dim,
                                               ratio * linear.value_head_dim]), axis=1)
    rows = lambda t: t.reshape(-1, qkvz.shape[-1])  # noqa: E731
    return np.concatenate([rows(q), rows(k), rows(v)]), np.ascontiguousarray(rows(z))


def tiled_heads(tensor: np.ndarray, leaf: str, linear: LinearAttentionArgs) -> np.ndarray:
    """One DeltaNet tensor (`leaf` within linear_attn) with its value heads reordered from grouped by key head
    (value head j reads key head j // r) to tiled (key head j % Hk)."""
    hk, ratio = linear.num_key_heads, linear.num_value_heads // linear.num_key_heads

    def tile(t: np.ndarray, axis: int, width: int) -> np.ndarray:  # value heads of `width` along `axis`
        shape = t.shape[:axis] + (hk, ratio, width) + t.shape[axis + 1:]
        return np.ascontiguousarray(np.swapaxes(t.reshape(shape), axis, axis + 1)).reshape(t.shape)

    keys = 2 * linear.num_key_heads * linear.key_head_dim
    if leaf in ("in_proj_qkv.weight", "conv1d.weight"):  # q and k rows (channels) stay
        return np.concatenate([tensor[:keys], tile(tensor[keys:], 0, linear.value_head_dim)])
    if leaf == "in_proj_z.weight":
        return tile(tensor, 0, linear.value_head_dim)
    if leaf in ("in_proj_b.weight", "in_proj_a.weight", "A", "dt_bias"):
        return tile(tensor, 0, 1)
    if leaf == "out_proj.weight":
        return tile(tensor, 1, linear.value_head_dim)
    return tensor
