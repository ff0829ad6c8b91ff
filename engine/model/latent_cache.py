"""The paged KV cache of multi-head latent attention (MLA): the compressed rows, not expanded keys and values."""

from __future__ import annotations

import torch

from engine.model.args import ModelArgs
from engine.model.attention import KVCache
from engine.model.kv_store import store_kv
from engine.system.triton_support import HAS_TRITON


class LatentKVCache(KVCache):
    """One pool per layer, [slots, 1, kv_lora_rank + qk_rope_head_dim]: each token's normed c_kv followed by its
    rotated k_pe, the only per-token state MLA needs (attention rebuilds keys and values from it)."""

    def __init__(self, num_layers: int, num_slots: int, latent_dim: int, dtype, device):
        self.row_kernel = HAS_TRITON and torch.device(device).type == "cuda"  # engine.model.kv_store
        # Uninitialised on purpose: attention only ever reads slots that a step has written (or masks them).
        self.latent = [torch.empty((num_slots, 1, latent_dim), dtype=dtype, device=device) for _ in range(num_layers)]

    def pools(self) -> tuple[list[torch.Tensor], ...]:
        return (self.latent,)

    def store(self, layer: int, slots: torch.Tensor, latent: torch.Tensor) -> None:
        """latent [T, 1, R + P] written at slots [T]."""
        if self.row_kernel:  # the K/V row-copy kernel with the latent as both: the same row written twice
            store_kv(self.latent[layer], self.latent[layer], slots, latent, latent)
        else:
            self.latent[layer].index_copy_(0, slots, latent)


def new_kv_cache(args: ModelArgs, num_slots: int, dtype, device, num_seqs: int = 1,
                 num_verify_rows: int = 0) -> KVCache:
    """The cache a model's attention reads: latent rows for MLA, per-head K and V otherwise (of the full-attention
    layers only in a hybrid model, whose linear layers keep a state for each of num_seqs sequences and, where they
    chain a verify step's rows, num_verify_rows scratch states; of each layer's own shape in a sandwich-norm
    model)."""
    if args.is_hybrid:
        from engine.model.state_cache import HybridCache
        from engine.model.state_layers import chains_verify_rows

        rows = num_verify_rows if chains_verify_rows(args.layer_types) else 0
        return HybridCache(args, num_slots, num_seqs, dtype, device, rows)
    if args.sandwich is not None:
        from engine.model.layer_shaped_cache import LayerShapedKVCache

        shapes = args.sandwich.layer_shapes(args.layer_types, args.num_key_value_heads, args.head_dim)
        return LayerShapedKVCache(shapes, num_slots, dtype, device)
    if args.is_mla:
        return LatentKVCache(args.num_hidden_layers, num_slots, args.mla.kv_lora_rank + args.head_dim, dtype, device)
    return KVCache(args.num_hidden_layers, num_slots, args.num_key_value_heads, args.head_dim, dtype, device)
