"""The bytes a checkpoint's draft (MTP) layer adds to a plan, when --speculative mtp or auto loads it: its dense
weights, its experts (resident, engine.model.mtp.DraftExperts) and one more attention layer of KV per token."""

from __future__ import annotations

from dataclasses import replace

from engine.alloc.memory_plan import ModelSizes
from engine.model.args import ModelArgs
from engine.model.mtp_names import draft_layer_args
from engine.model.sizes import dense_bytes, expert_bytes


def draft_layer_bytes(args: ModelArgs, dtype_bytes: int, has_head: bool) -> int:
    """The decoder layer with its router and shared experts, the projection over [embedding | hidden], three norms,
    the layer's own head where the file has one, and every routed expert."""
    D = args.hidden_size
    layer = dense_bytes(draft_layer_args(args), dtype_bytes) - dense_bytes(args, dtype_bytes)
    inputs = (2 * D * D + 3 * D + (args.vocab_size * D if has_head else 0)) * dtype_bytes
    return layer + inputs + args.num_experts * expert_bytes(args, dtype_bytes)


def with_draft_layer(sizes: ModelSizes, args: ModelArgs, has_head: bool) -> ModelSizes:
    """sizes with a draft layer counted (its dense weights and experts in the compute dtype, one more KV layer)."""
    kv_layers = args.num_hidden_layers if args.is_mla else args.num_kv_layers
    return replace(sizes, dense_bytes=sizes.dense_bytes + draft_layer_bytes(args, sizes.dtype_bytes, has_head),
                   kv_bytes_per_token=sizes.kv_bytes_per_token * (kv_layers + 1) // kv_layers)
