"""The cache of a hybrid model: paged K and V for its attention layers only, and beside them a fixed-size state per
sequence for each of its state layers (engine.model.state_mixer: Gated DeltaNet, short conv, Mamba-2), in the shapes
and dtypes each mixer declares."""

from __future__ import annotations

import torch

from engine.model.args import ModelArgs
from engine.model.attention import KVCache
from engine.model.state_chains import StateChains, chained
from engine.model.state_layers import state_shapes
from engine.model.state_store import store_rows


class HybridCache(KVCache):
    """KV pools indexed by attention layer; states[state layer] = one tensor [state row, ...] per state the layer's
    mixer keeps (engine.model.state_layers.state_shapes). Rows 0..num_seqs-1 are the sequences' state slots; the
    num_verify_rows rows after them hold a static-shape verify step's states after its rows that are not a sequence's
    last (engine.model.state_chains). A re-split resizes the KV pools only: the states are sized by the number of
    sequences, which it does not change."""

    def __init__(self, args: ModelArgs, num_slots: int, num_seqs: int, dtype, device, num_verify_rows: int = 0):
        super().__init__(args.num_kv_layers, num_slots, args.num_key_value_heads, args.head_dim, dtype, device)
        self.num_seqs, self.num_verify_rows = num_seqs, num_verify_rows
        # A prefill that starts a sequence zeroes its rows before reading them.
        self.states = [tuple(torch.zeros((num_seqs + num_verify_rows, *shape),
                                         dtype=torch.float32 if fp32 else dtype, device=device)
                             for shape, fp32 in shapes)
                       for shapes in state_shapes(args)]
        # A dynamic verify step's states after each of its positions: (state layer, state slot) -> [states].
        self.verified_states: dict[tuple[int, int], list[tuple[torch.Tensor, ...]]] = {}
        # A static verify step's state rows after each of a sequence's positions: state slot -> [rows].
        self.verified_rows: dict[int, list[int]] = {}

    @property
    def state_tensors(self) -> list[torch.Tensor]:
        return [t for states in self.states for t in states]

    @property
    def state_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.state_tensors)

    def read_states(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The states of the sequences in slots [B] (copies), each [B, ...]."""
        return tuple(state[slots] for state in self.states[layer])

    def write_states(self, layer: int, slots: torch.Tensor, new: tuple[torch.Tensor, ...]) -> None:
        """New states of the sequences in slots [B] (distinct). No host sync: a CUDA graph may hold it."""
        for state, rows in zip(self.states[layer], new):
            if self.row_kernel:  # index_copy_ sorts its indices under deterministic kernels (engine.model.state_store)
                store_rows(state, slots, rows)
            else:
                state.index_copy_(0, slots, rows.to(state.dtype))

    def keep_verified_state(self, layer: int, slot: int) -> None:
        """Keep a copy of the slot's states after a verified position (StateMixer.verify)."""
        kept = tuple(state[slot].clone() for state in self.states[layer])
        self.verified_states.setdefault((layer, slot), []).append(kept)

    def can_chain(self, num_drafts: int) -> bool:
        """Whether a static-shape verify step with this many drafts in all has scratch rows for its chains."""
        return num_drafts <= self.num_verify_rows

    def chain(self, sequences: list[tuple[int, int]]) -> StateChains:
        """A static-shape verify step's chains (sequences: (state slot, number of rows) in step order); the state
        rows after each sequence's positions are kept for roll_back."""
        chains, kept = chained(sequences, self.num_seqs)
        if len(chains.targets) - len(sequences) > self.num_verify_rows:
            raise ValueError(f"a verify step of {len(chains.targets) - len(sequences)} drafts has "
                             f"{self.num_verify_rows} scratch state rows")
        self.verified_rows.update(kept)
        return chains

    def roll_back(self, slot: int, position: int) -> None:
        """Set the slot's states of every state layer to those after the verify step's position (0: its first
        row); then forget what that step kept for the slot."""
        for (layer, kept_slot), kept in list(self.verified_states.items()):
            if kept_slot != slot:
                continue
            for state, value in zip(self.states[layer], kept[position]):
                state[slot].copy_(value)
            del self.verified_states[(layer, kept_slot)]
        rows = self.verified_rows.pop(slot, None)
        if rows is not None and rows[position] != slot:
            for state in self.state_tensors:
                state[slot].copy_(state[rows[position]])

    def forget_verified_states(self) -> None:
        self.verified_states.clear()
        self.verified_rows.clear()
