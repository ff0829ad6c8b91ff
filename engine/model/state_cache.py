"""The cache of a hybrid model: paged K and V for its full-attention layers only, and beside them a fixed-size
state per sequence for its linear-attention layers (engine.model.hybrid_layers.GatedDeltaNet)."""

from __future__ import annotations

import torch

from engine.model.args import ModelArgs
from engine.model.attention import KVCache
from engine.model.linear_args import LinearAttentionArgs
from engine.model.state_store import store_rows


class HybridCache(KVCache):
    """KV pools indexed by full-attention layer; conv [linear layer][seq slot, K-1, C] and recurrent
    [linear layer][seq slot, H, Dk, Dv] (fp32) states indexed by a sequence's state slot. A re-split resizes the
    KV pools only: the states are sized by the number of sequences, which it does not change."""

    def __init__(self, args: ModelArgs, num_slots: int, num_seqs: int, dtype, device):
        super().__init__(args.num_kv_layers, num_slots, args.num_key_value_heads, args.head_dim, dtype, device)
        linear: LinearAttentionArgs = args.linear
        conv_shape = (num_seqs, linear.conv_kernel_dim - 1, linear.conv_dim)
        state_shape = (num_seqs, linear.num_value_heads, linear.key_head_dim, linear.value_head_dim)
        # A prefill that starts a sequence zeroes its row before reading it.
        self.conv = [torch.zeros(conv_shape, dtype=dtype, device=device) for _ in range(args.num_linear_layers)]
        self.recurrent = [torch.zeros(state_shape, dtype=torch.float32, device=device)
                          for _ in range(args.num_linear_layers)]
        # A verify step's states after each of its positions: (linear layer, state slot) -> [(conv, recurrent)].
        self.verified_states: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}

    @property
    def state_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.conv, *self.recurrent))

    def read_states(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The conv and recurrent states of the sequences in slots [B] (copies): [B, K-1, C], [B, H, Dk, Dv]."""
        return self.conv[layer][slots], self.recurrent[layer][slots]

    def write_states(self, layer: int, slots: torch.Tensor, conv: torch.Tensor, recurrent: torch.Tensor) -> None:
        """New states of the sequences in slots [B] (distinct). No host sync: a CUDA graph may hold it."""
        if self.row_kernel:  # index_copy_ sorts its indices under deterministic kernels (engine.model.state_store)
            store_rows(self.conv[layer], slots, conv)
            store_rows(self.recurrent[layer], slots, recurrent)
        else:
            self.conv[layer].index_copy_(0, slots, conv.to(self.conv[layer].dtype))
            self.recurrent[layer].index_copy_(0, slots, recurrent)

    def keep_verified_state(self, layer: int, slot: int) -> None:
        """Keep a copy of the slot's state after a verified position (GatedDeltaNet.verify)."""
        kept = (self.conv[layer][slot].clone(), self.recurrent[layer][slot].clone())
        self.verified_states.setdefault((layer, slot), []).append(kept)

    def roll_back(self, slot: int, position: int) -> None:
        """Set the slot's states of every linear layer to those after the verify step's position (0: its first
        row); then forget what that step kept for the slot."""
        for (layer, kept_slot), states in list(self.verified_states.items()):
            if kept_slot != slot:
                continue
            conv, recurrent = states[position]
            self.conv[layer][slot].copy_(conv)
            self.recurrent[layer][slot].copy_(recurrent)
            del self.verified_states[(layer, kept_slot)]

    def forget_verified_states(self) -> None:
        self.verified_states.clear()
