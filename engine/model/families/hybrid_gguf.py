"""The hybrid linear-attention models in llama.cpp's GGUF files (qwen3next, qwen35moe), as its converter
(conversion/qwen.py: Qwen3NextModel, Qwen3_5MoeTextModel) writes them and its graphs (src/models/qwen3next.cpp,
qwen35moe.cpp) read them:
- Metadata: the shared MoE keys, the shared expert's expert_shared_feed_forward_length, partial RoPE as
  rope.dimension_count, full_attention_interval (every n-th layer full attention), and the DeltaNet's numbers as
  ssm.* keys: conv_kernel, state_size (key head dim, which must equal the value head dim), group_count (key heads),
  time_step_rank (value heads), inner_size (value heads x value head dim). qwen35moe adds rope.dimension_sections
  (its multimodal RoPE, the plain one on text) and nextn_predict_layers (multi-token-prediction blocks past the
  ones Wisp runs).
- Tensors: the norm before the MLP is post_attention_norm; q_proj (q and the output gate of each head) is attn_q;
  the DeltaNet's q|k|v projection attn_qkv and its z projection attn_gate (qwen3next fuses them per key head in its
  checkpoints; files of llama.cpp's converter before that split keep the checkpoint's fused tensor as ssm_in),
  b|a per key head ssm_ba
  (qwen3next) or ssm_beta and ssm_alpha (qwen35moe), the conv ssm_conv1d [C, K], dt_bias ssm_dt.bias, the gated
  norm ssm_norm, out_proj ssm_out.
- Values: ssm_a holds A = -exp(A_log); every zero-centred norm weight (the layers', the final one, q and k's)
  holds 1 + weight (ssm_norm, a plain one, does not); qwen35moe reorders the value heads from grouped by key head
  to tiled (value head j reads key head j % Hk: llama.cpp repeats q and k by tiling), in every tensor that has
  them (v rows of attn_qkv and the conv, attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt, ssm_out's columns).
Wisp's layers read these as stored (engine.model.linear_args: projections, tiled_value_heads, llama_cpp_values);
convert-gguf writes them from a checkpoint through engine.gguf.linear_specs."""

from __future__ import annotations

from dataclasses import replace

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.families.hybrid_config import hybrid_args

LAYER_MODULES = {
    "post_attention_layernorm": "post_attention_norm",
    "linear_attn.in_proj_qkvz": "ssm_in",
    "linear_attn.in_proj_qkv": "attn_qkv",
    "linear_attn.in_proj_z": "attn_gate",
    "linear_attn.in_proj_ba": "ssm_ba",
    "linear_attn.in_proj_b": "ssm_beta",
    "linear_attn.in_proj_a": "ssm_alpha",
    "linear_attn.conv1d": "ssm_conv1d",
    "linear_attn.norm": "ssm_norm",
    "linear_attn.out_proj": "ssm_out",
}
LAYER_PARAMS = {"linear_attn.A": "ssm_a", "linear_attn.dt_bias": "ssm_dt.bias"}
DEFAULT_INTERVAL = 4  # llama.cpp's full_attention_interval when a file has none


def read_gguf(key: GgufKeys, model_type: str, projections: str, tiled: bool) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata, in the file's
    layout (projections, tiled value heads, llama.cpp's values)."""
    if key.get("rope.scaling.type") not in (None, "none"):
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{key.get('rope.scaling.type')}' "
                                    f"({key.arch}.rope.scaling.type) is not supported by Wisp's engine yet")
    layers = key.integer("block_count") - key.integer("nextn_predict_layers", 0)
    missing = [i for i in range(layers) if not key.has_tensor(f"blk.{i}.ffn_gate_inp.weight")]
    if missing:
        raise UnsupportedModelError(f"{key.path}: layers {missing} have no router (ffn_gate_inp); Wisp runs "
                                    f"{key.arch} with experts in every layer")
    head_dim = key.integer("attention.key_length")
    if key.integer("attention.value_length", head_dim) != head_dim:
        raise UnsupportedModelError(f"{key.path}: key_length != value_length: Wisp's attention needs them equal")
    value_heads, key_head_dim = key.integer("ssm.time_step_rank"), key.integer("ssm.state_size")
    value_head_dim, rest = divmod(key.integer("ssm.inner_size"), value_heads)
    if rest:
        raise ModelFormatError(f"{key.path}: {key.arch}.ssm.inner_size is no multiple of ssm.time_step_rank")
    moe_intermediate = key.shape("blk.0.ffn_gate_exps.weight")[1]
    config = {
        **config_basics(key),
        "num_hidden_layers": layers,
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": key.integer("attention.head_count_kv"),
        "head_dim": head_dim,
        "rope_theta": key.number("rope.freq_base", 10000.0),
        "num_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length", moe_intermediate),
        "intermediate_size": key.integer("feed_forward_length", moe_intermediate),
        "shared_expert_intermediate_size": key.integer("expert_shared_feed_forward_length", 0),
        "partial_rotary_factor": key.integer("rope.dimension_count", head_dim) / head_dim,
        "full_attention_interval": key.integer("full_attention_interval", DEFAULT_INTERVAL),
        "linear_num_key_heads": key.integer("ssm.group_count"),
        "linear_num_value_heads": value_heads,
        "linear_key_head_dim": key_head_dim,
        "linear_value_head_dim": value_head_dim,
        "linear_conv_kernel_dim": key.integer("ssm.conv_kernel"),
    }
    args = hybrid_args(config, model_type, projections, norm_topk_prob=True)
    return replace(args, linear=replace(args.linear, tiled_value_heads=tiled, llama_cpp_values=True))


def check_convertible(args: ModelArgs, arch: str) -> None:
    """What llama.cpp's graph fixes: top-k renormalised, experts (and a shared expert) in every layer, no attention
    biases, equal key and value head dims in the DeltaNet, the default RoPE, full attention every n-th layer."""
    problems = []
    if not args.router.norm_topk_prob:
        problems.append("norm_topk_prob=false (llama.cpp always renormalises the top-k router weights)")
    if not all(args.moe_layers) or not args.shared_experts.shared_expert_intermediate_size:
        problems.append("layers without experts or without the shared expert")
    if args.attention.attention_bias:
        problems.append("attention biases")
    if args.linear.key_head_dim != args.linear.value_head_dim:
        problems.append("linear_key_head_dim != linear_value_head_dim")
    if args.rope_scaling is not None:
        problems.append("RoPE scaling")
    if full_attention_interval(args) is None:
        problems.append("a layer_types list that is not every n-th layer full attention")
    if problems:
        raise UnsupportedModelError(f"{args.model_type} with {'; '.join(problems)}: llama.cpp's {arch} graph does not "
                                    "compute that, so its GGUF would compute a different model")


def full_attention_interval(args: ModelArgs) -> int | None:
    """n when layer i is full attention exactly when (i + 1) % n == 0; None otherwise."""
    full = [i for i, kind in enumerate(args.layer_types) if kind == "full_attention"]
    interval = full[0] + 1 if full else args.num_hidden_layers + 1
    expected = [i for i in range(args.num_hidden_layers) if (i + 1) % interval == 0]
    return interval if full == expected else None


def write_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    linear = args.linear
    writer.add_ssm_conv_kernel(linear.conv_kernel_dim)
    writer.add_ssm_state_size(linear.key_head_dim)
    writer.add_ssm_group_count(linear.num_key_heads)
    writer.add_ssm_time_step_rank(linear.num_value_heads)
    writer.add_ssm_inner_size(linear.value_head_dim * linear.num_value_heads)
    writer.add_full_attention_interval(full_attention_interval(args))


def file_args(args: ModelArgs, projections: str, tiled: bool) -> ModelArgs:
    """A checkpoint's args in the layout of its GGUF file (convert-gguf computes the file's tensors from the
    checkpoint's: engine.gguf.linear_specs)."""
    linear = replace(args.linear, projections=projections, tiled_value_heads=tiled, llama_cpp_values=True)
    return replace(args, linear=linear)
