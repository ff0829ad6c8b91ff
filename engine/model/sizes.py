"""Byte sizes of a model from its config alone, so a memory plan can be shown before anything loads."""

from __future__ import annotations

from engine.alloc.memory_plan import ModelSizes
from engine.model.args import ModelArgs
from engine.quant.types import quant_type, slot_bytes


def attention_params(args: ModelArgs) -> int:
    D, q, kv = args.hidden_size, args.num_attention_heads * args.head_dim, args.num_key_value_heads * args.head_dim
    params = D * q + 2 * D * kv + q * D
    if args.attention_bias:
        params += q + 2 * kv
    if args.o_proj_bias:
        params += D
    if args.qk_norm == "per_head":
        params += 2 * args.head_dim
    elif args.qk_norm == "full":
        params += q + kv
    if args.attention_sinks:
        params += args.num_attention_heads
    return params


def expert_bias_params(args: ModelArgs) -> int:
    """Router and expert biases of one MoE layer (gpt_oss): resident beside the dense weights, never in a slot."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    return (E if args.router_bias else 0) + (E * (2 * I + D) if args.expert_bias else 0)


def dense_params(args: ModelArgs) -> int:
    """Everything but the routed experts: embeddings, attention, norms, routers, shared experts, dense MLPs."""
    D = args.hidden_size
    params = args.vocab_size * D * (1 if args.tie_word_embeddings else 2) + D
    for is_moe in args.moe_layers:
        params += attention_params(args) + 2 * D
        if is_moe:
            params += args.num_experts * D + expert_bias_params(args)
            if args.shared_expert_intermediate_size:
                params += 3 * D * args.shared_expert_intermediate_size + D
        else:
            params += 3 * D * args.intermediate_size
    return params


def expert_bytes(args: ModelArgs, dtype_bytes: int) -> int:
    """One expert's block: dense at dtype_bytes, or the slot of experts stored quantized (engine.quant.layout)."""
    if not args.expert_quant:
        return args.expert_numel * dtype_bytes
    D, I, row_bytes = args.hidden_size, args.moe_intermediate_size, quant_type(args.expert_quant).row_bytes
    return slot_bytes(I * row_bytes(D), I * row_bytes(D), D * row_bytes(I))


def model_sizes(args: ModelArgs, dtype_bytes: int) -> ModelSizes:
    return ModelSizes(
        dense_bytes=dense_params(args) * dtype_bytes,
        expert_bytes=expert_bytes(args, dtype_bytes),
        num_moe_layers=args.num_moe_layers,
        num_experts=args.num_experts,
        top_k=args.num_experts_per_tok,
        kv_bytes_per_token=args.kv_bytes_per_token(dtype_bytes),
        hidden_size=args.hidden_size,
        vocab_size=args.vocab_size,
        dtype_bytes=dtype_bytes,
        num_layers=args.num_hidden_layers,
    )
