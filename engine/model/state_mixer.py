"""A token mixer with a fixed-size state per sequence (Gated DeltaNet, short conv, Mamba-2): how one forward's
rows reach each sequence's state in the hybrid cache. A subclass says what its math is:

- `mix_inputs(x [T, D])` -> (per-token inputs, each [T, ...]; what `output` needs besides the mixed rows)
- `prefill(inputs of one sequence's new tokens, its states)` -> (out [T, *out_tail], new states): the chunked form
- `step(inputs of B sequences' one new token each, their states)` -> (out [B, *out_tail], new states): the recurrent
  form, with no host sync and no data-dependent shape, so a CUDA graph may hold it
- `output(out [T, *out_tail], extra)` -> the layer's output [T, D]
- `out_tail`: the shape of one token's mixed row; `out_dtype`: its dtype where not the input's

A decode step steps every row's sequence at once; a verify step (drafts) steps its rows one at a time and keeps the
state after each for HybridCache.roll_back (on the dynamic path as copies, in the static-shape step in the state
cache's scratch rows: engine.model.state_chains); every other span runs the chunked form from its sequence's state
(zeros when the span starts the sequence)."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.attention import AttentionMetadata, PaddedDecodeMetadata, SeqSpan
from engine.model.state_cache import HybridCache


class StateMixer(nn.Module):
    state_layer: int  # this layer's index among the state layers (the state cache's)
    out_tail: tuple[int, ...]
    out_dtype: torch.dtype | None = None

    def forward(self, x: torch.Tensor, meta: AttentionMetadata, cache: HybridCache) -> torch.Tensor:
        inputs, extra = self.mix_inputs(x)
        steps, rows, slots, prompts = meta.state_steps
        if len(steps) == x.shape[0]:  # a decode step: every row steps its sequence, in order
            return self.output(self.decode(slots, inputs, cache), extra)
        out = torch.empty(x.shape[0], *self.out_tail, dtype=self.out_dtype or x.dtype, device=x.device)
        if steps:
            out[rows] = self.decode(slots, tuple(t[rows] for t in inputs), cache)
        for span in prompts:
            if span.is_verify:
                self.verify(span, inputs, out, cache)
            else:
                self.prefill_span(span, inputs, out, cache)
        return self.output(out, extra)

    def forward_padded(self, x: torch.Tensor, meta: PaddedDecodeMetadata, cache: HybridCache) -> torch.Tensor:
        """B rows of the static-shape step, their state rows in meta (engine.model.state_chains): no shape depends
        on data and no host sync, so a CUDA graph may hold it."""
        inputs, extra = self.mix_inputs(x)
        return self.output(self.decode_padded(meta, inputs, cache), extra)

    def decode_padded(self, meta: PaddedDecodeMetadata, inputs, cache: HybridCache) -> torch.Tensor:
        """Rows of distinct sequences step at once; a verify step's chained rows one after another, each from the
        states its source row holds into its target row (meta.is_chained, known on the host: the static step's
        graphs on CUDA hold the fused kernels, which read the chains on the device, GatedDeltaNet.decode_padded)."""
        if not meta.is_chained:
            return self.decode(meta.state_slots, inputs, cache)
        rows = []
        for row in range(inputs[0].shape[0]):
            one = slice(row, row + 1)
            out, new = self.step(tuple(t[one] for t in inputs),
                                 cache.read_states(self.state_layer, meta.state_sources[one]))
            cache.write_states(self.state_layer, meta.state_targets[one], new)
            rows.append(out)
        return torch.cat(rows)

    def prefill_span(self, span: SeqSpan, inputs, out: torch.Tensor, cache: HybridCache) -> None:
        """A sequence's new tokens from its stored states (zeros when they start the sequence)."""
        rows, slot = slice(span.q_start, span.q_start + span.q_len), span.state_slot
        stored = cache.states[self.state_layer]
        if span.kv_slots.numel() == span.q_len:
            for state in stored:
                state[slot].zero_()
        out[rows], new = self.prefill(tuple(t[rows] for t in inputs), tuple(state[slot] for state in stored))
        for state, value in zip(stored, new):
            state[slot] = value

    def verify(self, span: SeqSpan, inputs, out: torch.Tensor, cache: HybridCache) -> None:
        """A sequence's last token and its drafts: the recurrent form one position at a time (as decode steps
        compute them), the states after each position kept for HybridCache.roll_back."""
        slots = torch.full((1,), span.state_slot, dtype=torch.long, device=out.device)
        for row in range(span.q_start, span.q_start + span.q_len):
            out[row : row + 1] = self.decode(slots, tuple(t[row : row + 1] for t in inputs), cache)
            cache.keep_verified_state(self.state_layer, span.state_slot)

    def decode(self, slots: torch.Tensor, inputs, cache: HybridCache) -> torch.Tensor:
        """One new token of each of B sequences at once (their inputs [B, ...] and state slots [B])."""
        out, new = self.step(inputs, cache.read_states(self.state_layer, slots))
        cache.write_states(self.state_layer, slots, new)
        return out
