"""Nemotron-H MoE in llama.cpp's files (its nemotron_h_moe architecture, src/models/nemotron-h.cpp and
mamba-base.cpp):
- metadata: head_count_kv and feed_forward_length per layer tell the blocks apart (both 0: Mamba-2; KV heads and no
  feed-forward: attention; a feed-forward length: the MoE block, the only one the loader builds there, so dense
  MLP blocks cannot be written); the ssm.* keys (conv_kernel, inner_size, state_size, time_step_rank = the Mamba
  heads, group_count); moe_latent_size; the grouped sigmoid router's keys;
- tensors: each block's norm as attn_norm; Mamba-2's ssm_in, ssm_conv1d [C, K] f32 with its bias, ssm_dt.bias,
  ssm_a = -exp(A_log) and ssm_d as [H, 1] f32, the gated norm ssm_norm as [groups, inner / groups], ssm_out; the
  latent projections ffn_latent_down / ffn_latent_up; the ungated experts as ffn_up_exps and ffn_down_exps (no
  gate); the shared expert as ffn_up_shexp / ffn_down_shexp; the router's correction bias as exp_probs_b."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.families.family import JoinedTensor
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.families.tensor_spec import EXPERTS, TensorSpec, as_f32

LAYER_MODULES = {
    "norm": "attn_norm",
    "mixer.in_proj": "ssm_in",
    "mixer.conv1d": "ssm_conv1d",
    "mixer.out_proj": "ssm_out",
    "mixer.norm": "ssm_norm",
    "mlp.shared.up_proj": "ffn_up_shexp",
    "mlp.shared.down_proj": "ffn_down_shexp",
    "mlp.fc1_latent_proj": "ffn_latent_down",
    "mlp.fc2_latent_proj": "ffn_latent_up",
}
LAYER_PARAMS = {"mixer.dt_bias": "ssm_dt.bias", "mixer.A_log": "ssm_a", "mixer.D": "ssm_d"}
LETTERS = {"mamba": "M", "full_attention": "*", "moe": "E", "mlp": "-"}


def _per_head(args: ModelArgs) -> tuple[tuple[int, ...], ...]:
    return ((args.mamba.num_heads, 1),)


def _decay(args: ModelArgs, a_log: np.ndarray) -> tuple[np.ndarray]:
    """-exp(A_log) in fp32."""
    return (-np.exp(a_log.astype(np.float32)).reshape(-1, 1),)


def _log_decay(args: ModelArgs, parts: list[np.ndarray]) -> np.ndarray:
    return np.log(-parts[0].reshape(-1))


def _norm_shape(args: ModelArgs) -> tuple[tuple[int, ...], ...]:
    mamba = args.mamba
    return ((mamba.n_groups, mamba.inner_size // mamba.n_groups),)


JOINED = {
    "mixer.A_log": JoinedTensor(parts=("ssm_a",), shapes=_per_head, split=_decay, join=_log_decay, keep_f32=True),
    "mixer.D": JoinedTensor(parts=("ssm_d",), shapes=_per_head, split=lambda args, d: (d.reshape(-1, 1),),
                            join=lambda args, parts: parts[0].reshape(-1), keep_f32=True),
    "mixer.norm.weight": JoinedTensor(parts=("ssm_norm.weight",), shapes=_norm_shape,
                                      split=lambda args, w: (w.reshape(_norm_shape(args)[0]),),
                                      join=lambda args, parts: parts[0].reshape(-1), keep_f32=True),
}
F32_TENSORS = ("ssm_conv1d",)  # ggml's ssm_conv reads an f32 kernel


def write_layer_keys(writer, args: ModelArgs) -> None:
    writer.add_feed_forward_length([args.moe_intermediate_size if kind == "moe" else 0 for kind in args.layer_types])
    writer.add_head_count_kv([args.num_key_value_heads if kind == "full_attention" else 0
                              for kind in args.layer_types])
    writer.add_key_length(args.head_dim)
    writer.add_value_length(args.head_dim)
    writer.add_rope_dimension_count(args.head_dim)  # no RoPE in the graph: a count it does not read
    writer.add_rope_freq_base(args.rope_theta)


def write_metadata(writer, args: ModelArgs) -> None:
    mamba, router = args.mamba, args.router
    writer.add_layer_norm_eps(args.rms_norm_eps)
    writer.add_ssm_conv_kernel(mamba.conv_kernel_dim)
    writer.add_ssm_inner_size(mamba.inner_size)
    writer.add_ssm_state_size(mamba.state_size)
    writer.add_ssm_time_step_rank(mamba.num_heads)
    writer.add_ssm_group_count(mamba.n_groups)
    writer.add_expert_weights_norm(router.norm_topk_prob)
    writer.add_expert_weights_scale(router.routed_scaling_factor)
    if args.experts.latent_size:
        writer.add_moe_latent_size(args.experts.latent_size)
    if router.n_group > 1:
        writer.add_expert_group_count(router.n_group)
        writer.add_expert_group_used_count(router.topk_group)


def expert_specs(args: ModelArgs, ckpt, names, layer: int) -> list[TensorSpec]:
    """The ungated experts: up [E, I, L] and down [E, L, I] (L the latent width)."""
    E, L, I = args.num_experts, args.expert_hidden_size, args.moe_intermediate_size

    def stacked(projection: str, shape: tuple[int, int]) -> np.ndarray:
        if ckpt.has(names.fused_weight(layer, f"{projection}_proj")):
            return as_f32(ckpt.get(names.fused_weight(layer, f"{projection}_proj"), (E, *shape)))
        return np.stack([as_f32(ckpt.get(names.expert_weight(layer, e, f"{projection}_proj"), shape))
                         for e in range(E)])

    return [TensorSpec(f"blk.{layer}.{EXPERTS['up']}.weight", (E, I, L), lambda: stacked("up", (I, L))),
            TensorSpec(f"blk.{layer}.{EXPERTS['down']}.weight", (E, L, I), lambda: stacked("down", (L, I)))]


def check_convertible(args: ModelArgs) -> None:
    if "mlp" in args.layer_types:
        raise UnsupportedModelError("nemotron_h with dense MLP blocks ('-'): llama.cpp's nemotron_h_moe loader "
                                    "builds experts wherever a layer has a feed-forward block")
    if args.mamba.proj_bias:
        raise UnsupportedModelError("nemotron_h with use_bias: llama.cpp's nemotron_h_moe files have no Mamba "
                                    "projection biases")


def config(key: GgufKeys) -> dict:
    """The checkpoint's config.json fields from a file's metadata (nemotron_h.read_config reads them)."""
    layers = key.integer("block_count") - key.integer("nextn_predict_layers", 0)
    kv_heads, ff = key.get("attention.head_count_kv"), key.get("feed_forward_length")
    if not isinstance(kv_heads, list) or not isinstance(ff, list) or len(kv_heads) < layers or len(ff) < layers:
        raise ModelFormatError(f"{key.path}: {key.arch}.attention.head_count_kv and feed_forward_length must list "
                               f"each of the {layers} layers")
    kinds = ["moe" if ff[i] else "full_attention" if kv_heads[i] else "mamba" for i in range(layers)]
    attention = {kv_heads[i] for i in range(layers) if kinds[i] == "full_attention"}
    if len(attention) > 1:
        raise UnsupportedModelError(f"{key.path}: attention layers with different KV heads are not supported")
    inner, heads = key.integer("ssm.inner_size"), key.integer("ssm.time_step_rank")
    first_mamba = kinds.index("mamba") if "mamba" in kinds else None
    return {
        **config_basics(key, eps=None),
        "hybrid_override_pattern": "".join(LETTERS[kind] for kind in kinds),
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": attention.pop() if attention else 1,
        "head_dim": key.integer("attention.key_length"),
        "layer_norm_epsilon": key.number("attention.layer_norm_rms_epsilon",
                                         key.number("attention.layer_norm_epsilon")),
        "n_routed_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "moe_shared_expert_intermediate_size": key.integer("expert_shared_feed_forward_length", 0),
        "moe_latent_size": key.integer("moe_latent_size", 0) or None,
        "n_group": key.integer("expert_group_count", 1),
        "topk_group": key.integer("expert_group_used_count", 1),
        "norm_topk_prob": bool(key.get("expert_weights_norm", False)),
        "routed_scaling_factor": key.number("expert_weights_scale", 1.0),
        "mamba_num_heads": heads,
        "mamba_head_dim": inner // heads,
        "ssm_state_size": key.integer("ssm.state_size"),
        "n_groups": key.integer("ssm.group_count"),
        "conv_kernel": key.integer("ssm.conv_kernel"),
        "use_conv_bias": first_mamba is None or key.has_tensor(f"blk.{first_mamba}.ssm_conv1d.bias"),
        "intermediate_size": 0,
    }
