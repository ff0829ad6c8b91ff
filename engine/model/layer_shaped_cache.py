"""A paged KV cache whose layers differ in key/value heads and head size (engine.model.sandwich's sliding and full
layers); every layer's pool is indexed by the same slots, so one block table serves them all."""

from __future__ import annotations

import torch

from engine.model.attention import KVCache
from engine.system.triton_support import HAS_TRITON


class LayerShapedKVCache(KVCache):
    """Per-layer K and V pools [num_slots, kv_heads, head_dim], each layer with its own (kv_heads, head_dim)."""

    def __init__(self, shapes: list[tuple[int, int]], num_slots: int, dtype, device):
        self.row_kernel = HAS_TRITON and torch.device(device).type == "cuda"  # engine.model.kv_store
        # Uninitialised on purpose: attention only ever reads slots that a step has written.
        self.k = [torch.empty((num_slots, *shape), dtype=dtype, device=device) for shape in shapes]
        self.v = [torch.empty((num_slots, *shape), dtype=dtype, device=device) for shape in shapes]
