"""Byte sizes of a model from its config alone, so a memory plan can be shown before anything loads."""

from __future__ import annotations

from engine.alloc.memory_plan import ModelSizes
from engine.model.args import ModelArgs
from engine.quant.types import quant_type, slot_bytes


def mla_attention_params(args: ModelArgs) -> int:
    """Multi-head latent attention (engine.model.mla_attention): q (direct or through its LoRA), the compressing
    kv_a_proj_with_mqa, the expanding kv_b_proj, o_proj, the LoRA norms and the biases attention_bias adds."""
    mla = args.mla
    D, H, R, P = args.hidden_size, args.num_attention_heads, mla.kv_lora_rank, args.head_dim
    q_out = H * (mla.qk_nope_head_dim + P)
    bias = args.attention.attention_bias
    if mla.q_lora_rank:
        q = D * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * q_out + (mla.q_lora_rank if bias else 0)
    else:
        q = D * q_out
    kv = D * (R + P) + R + R * H * (mla.qk_nope_head_dim + mla.v_head_dim) + ((R + P) if bias else 0)
    return q + kv + H * mla.v_head_dim * D + (D if bias else 0)


def attention_params(args: ModelArgs) -> int:
    if args.is_mla:
        return mla_attention_params(args)
    D, q, kv = args.hidden_size, args.num_attention_heads * args.head_dim, args.num_key_value_heads * args.head_dim
    attention = args.attention
    params = D * q + 2 * D * kv + q * D
    if attention.attention_bias:
        params += q + 2 * kv
    if attention.o_proj_bias:
        params += D
    if attention.qk_norm == "per_head":
        params += 2 * args.head_dim
    elif attention.qk_norm == "full":
        params += q + kv
    if attention.attention_sinks:
        params += args.num_attention_heads
    return params


def token_mixer_params(args: ModelArgs, layer: int) -> int:
    """A layer's attention, or its linear attention in a hybrid model; a gated attention's q_proj is twice as wide."""
    layer_types = args.attention.layer_types
    if layer_types and layer_types[layer] == "linear_attention":
        return args.linear.params(args.hidden_size)
    gate = args.hidden_size * args.num_attention_heads * args.head_dim if args.attention.attention_output_gate else 0
    return attention_params(args) + gate


def expert_bias_params(args: ModelArgs) -> int:
    """Router and expert biases of one MoE layer (gpt_oss): resident beside the dense weights, never in a slot."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    return (E if args.router.bias else 0) + (E * (2 * I + D) if args.experts.bias else 0)


def dense_params(args: ModelArgs) -> int:
    """Everything but the routed experts: embeddings, attention, norms, routers, shared experts, dense MLPs."""
    D = args.hidden_size
    params = args.vocab_size * D * (1 if args.tie_word_embeddings else 2) + D
    for layer, is_moe in enumerate(args.moe_layers):
        params += token_mixer_params(args, layer) + 2 * D
        if is_moe:
            params += router_params(args) + expert_bias_params(args)
            if args.shared_experts.shared_expert_intermediate_size:
                params += D  # the gated shared expert's gate
            params += 3 * D * shared_expert_width(args)  # always resident
        else:
            params += 3 * D * args.intermediate_size
    return params


def router_params(args: ModelArgs) -> int:
    """One MoE layer's router: its weight, and the correction bias of DeepSeek-V3-style (noaux_tc) routing."""
    return args.num_experts * args.hidden_size + (args.num_experts if args.router.topk_method == "noaux_tc" else 0)


def dense_bytes(args: ModelArgs, dtype_bytes: int) -> int:
    """dense_params in the model's dtype, except DeepSeek-style routers, which stay fp32 (engine.model.routers.Fp32Gate)."""
    fp32_params = router_params(args) * args.num_moe_layers if args.router.topk_method is not None else 0
    return dense_params(args) * dtype_bytes + fp32_params * (4 - dtype_bytes)


def shared_expert_width(args: ModelArgs) -> int:
    """Intermediate width of a MoE layer's shared experts: Qwen's one gated expert, DeepSeek's n_shared_experts."""
    return args.shared_experts.intermediate_size(args.moe_intermediate_size)


def shared_expert_params(args: ModelArgs) -> int:
    """The shared experts' gate, up and down projections over all MoE layers (dense_params counts them)."""
    return args.num_moe_layers * 3 * args.hidden_size * shared_expert_width(args)


def expanded_kv_bytes_per_token(args: ModelArgs, dtype_bytes: int) -> int:
    """MLA: one layer's keys [H, N + P] and values [H, V] of a token, rebuilt from its cache row; else 0."""
    if not args.is_mla:
        return 0
    mla = args.mla
    return args.num_attention_heads * (mla.qk_nope_head_dim + args.head_dim + mla.v_head_dim) * dtype_bytes


def expert_bytes(args: ModelArgs, dtype_bytes: int) -> int:
    """One expert's block: dense at dtype_bytes, or the slot of experts stored quantized (engine.quant.layout)."""
    if not args.experts.quant:
        return args.expert_numel * dtype_bytes
    D, I, row_bytes = args.hidden_size, args.moe_intermediate_size, quant_type(args.experts.quant).row_bytes
    return slot_bytes(I * row_bytes(D), I * row_bytes(D), D * row_bytes(I))


def model_sizes(args: ModelArgs, dtype_bytes: int) -> ModelSizes:
    return ModelSizes(
        dense_bytes=dense_bytes(args, dtype_bytes),
        expert_bytes=expert_bytes(args, dtype_bytes),
        num_moe_layers=args.num_moe_layers,
        num_experts=args.num_experts,
        top_k=args.num_experts_per_tok,
        kv_bytes_per_token=args.kv_bytes_per_token(dtype_bytes),
        expanded_kv_bytes_per_token=expanded_kv_bytes_per_token(args, dtype_bytes),
        hidden_size=args.hidden_size,
        vocab_size=args.vocab_size,
        dtype_bytes=dtype_bytes,
        num_layers=args.num_hidden_layers,
        shared_expert_bytes=shared_expert_params(args) * dtype_bytes,
        state_bytes_per_seq=args.state_bytes_per_seq(dtype_bytes),
    )
