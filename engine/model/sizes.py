"""Byte sizes of a model from its config alone, so a memory plan can be shown before anything loads."""

from __future__ import annotations

from engine.alloc.memory_plan import ModelSizes
from engine.model.args import ModelArgs
from engine.model.state_layers import chains_verify_rows, is_block_stack, is_state_layer, state_spec
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
    """A layer's attention, or its state mixer in a hybrid model (engine.model.state_layers); a gated attention's
    q_proj is twice as wide."""
    if args.layer_types and is_state_layer(args.layer_types[layer]):
        return state_spec(args, args.layer_types[layer]).params(args.hidden_size)
    gate = args.hidden_size * args.num_attention_heads * args.head_dim if args.attention.attention_output_gate else 0
    return attention_params(args) + gate


def expert_bias_params(args: ModelArgs) -> int:
    """Router and expert biases of one MoE layer (gpt_oss): resident beside the dense weights, never in a slot."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    return (E if args.router.bias else 0) + (E * (2 * I + D) if args.experts.bias else 0)


def sandwich_layer_params(args: ModelArgs, layer: int) -> int:
    """A layer of engine.model.sandwich: its attention (the layer kind's shape; full layers' keys may be the values;
    q/k norms), seven norms, the dense MLP, the scaled router (weight, scale, per-expert scale), the layer scalar."""
    D, H, E, spec = args.hidden_size, args.num_attention_heads, args.num_experts, args.sandwich
    is_full = args.layer_types[layer] == "full_attention"
    kv_heads, head_dim = spec.head_shape((args.num_key_value_heads, args.head_dim), is_full)
    values = 0 if is_full and spec.full_keys_are_values else D * kv_heads * head_dim
    attention = 2 * D * H * head_dim + D * kv_heads * head_dim + values + 2 * head_dim
    return attention + 7 * D + 3 * D * args.intermediate_size + (E * D + D + E) + 1


def block_params(args: ModelArgs, layer: int) -> int:
    """One layer of a block stack (engine.model.hybrid.BlockLayer): its norm and its one block, the latent MoE block
    (router, ReLU² shared expert, latent projections), a ReLU² MLP or a token mixer."""
    kind, D = args.layer_types[layer], args.hidden_size
    if kind == "moe":
        return D + router_params(args) + 2 * D * args.shared_experts.shared_expert_intermediate_size + 2 * D * args.experts.latent_size
    if kind == "mlp":
        return D + 2 * D * args.intermediate_size
    return D + token_mixer_params(args, layer)


def dense_params(args: ModelArgs) -> int:
    """Everything but the routed experts: embeddings, attention, norms, routers, shared experts, dense MLPs."""
    D = args.hidden_size
    params = args.vocab_size * D * (1 if args.tie_word_embeddings else 2) + D
    if args.sandwich is not None:
        return params + sum(sandwich_layer_params(args, layer) for layer in range(args.num_hidden_layers))


    if is_block_stack(args.layer_types):
        return params + sum(block_params(args, layer) for layer in range(args.num_hidden_layers))
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
    """One MoE layer's router: its weight, and the correction bias of DeepSeek-V3-style (noaux_tc), biased
    softmax and sigmoid (engine.model.sigmoid_router) routing."""
    has_bias = args.router.topk_method == "noaux_tc" or args.biased_softmax is not None or args.router.kind == "sigmoid_topk"
    return args.num_experts * args.hidden_size + (args.num_experts if has_bias else 0)


def dense_bytes(args: ModelArgs, dtype_bytes: int) -> int:
    """dense_params in the model's dtype (plus a vision tower's weights and one image's activations: engine.vision,
    ModelArgs.extra), except the DeepSeek-style and biased softmax routers, which stay fp32
    (engine.model.routers.Fp32Gate, engine.model.biased_softmax_router.BiasedFp32Gate), and the sigmoid router's
    expert bias (engine.model.sigmoid_router.ExpertBias)."""
    fp32_router = args.router.topk_method is not None or args.biased_softmax is not None
    fp32_params = router_params(args) * args.num_moe_layers if fp32_router else 0
    if args.router.kind == "sigmoid_topk":
        fp32_params = args.num_experts * args.num_moe_layers
    vision = args.extra.get("vision_params", 0) + args.extra.get("vision_workspace", 0)
    return (dense_params(args) + vision) * dtype_bytes + fp32_params * (4 - dtype_bytes)


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
        verify_state_bytes_per_row=(args.state_bytes_per_seq(dtype_bytes) if chains_verify_rows(args.layer_types)
                                    else 0),
    )
