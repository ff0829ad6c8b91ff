"""Drafts from the model's own multi-token-prediction layer (engine.model.mtp), on the engine thread.

The draft layer keeps one KV entry per position q: its input there is (the model's hidden state at q, the token at
q+1). Every model step hands over the hidden states it computed (observe); they wait until the tokens after them are
known. Before a verify step (propose), the draft layer runs over the waiting positions the model has accepted, up
to L-2 for a sequence of L tokens, writing their KV; its last row predicts the token at L (the first draft, one past
the model's own next token at L-1). Each further draft runs the layer at the next position on the draft before it,
its own output standing in for the model's hidden state. Rejected positions leave entries that the next round
overwrites with the model's hidden states. Drafts are the draft logits' argmax: verification (greedy or rejection
sampling with a deterministic draft) keeps the output the model's whatever they are. The catch-up runs eagerly (its
length varies); the drafts after the first run one position each, eagerly or, given DraftSteps, through static
buffers (a CUDA graph on CUDA: engine.generation.speculative.draft_graphs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from engine.generation.speculative.draft_graphs import DraftSteps
from engine.model.attention import AttentionMetadata, SeqSpan
from engine.model.mtp import DraftModel


@dataclass
class Waiting:
    """A sequence's model hidden states at positions start.. whose draft-layer KV is not written yet."""

    seq: object  # engine.runtime.sequence.Sequence: its block table and tokens
    start: int
    hidden: torch.Tensor  # [n, D]


class MtpDrafter:
    def __init__(self, draft: DraftModel, blocks, wants: Callable[[object], bool] = lambda seq: True,
                 steps: DraftSteps | None = None):
        self.draft, self.blocks = draft, blocks  # blocks: the engine's BlockManager (its block size, reserve)
        self.wants = wants  # does this sequence draft? (the others' hidden states are not kept)
        self.steps = steps  # the drafts after the first with static shapes (a CUDA graph); None: eager, by run
        self.waiting: dict[str, Waiting] = {}
        self.num_failures = 0  # proposals the draft layer failed (the steps went on without drafts)

    def observe(self, seq, first_position: int, hidden: torch.Tensor) -> None:
        """A model step computed hidden [n, D] of seq at positions first_position..: they replace what waited at
        those positions and after (a recomputed or rejected stretch)."""
        if not self.wants(seq):
            return
        before = self.waiting.get(seq.request_id)
        if before is not None and before.seq is seq and before.start < first_position:
            kept = before.hidden[: first_position - before.start]
            if kept.shape[0] == first_position - before.start:
                hidden = torch.cat([kept, hidden])
                first_position = before.start
        self.waiting[seq.request_id] = Waiting(seq, first_position, hidden)

    def forget(self, request_id: str) -> None:
        self.waiting.pop(request_id, None)

    def propose(self, request_id: str, token_ids: list[int], num_drafts: int) -> list[int]:
        """Up to num_drafts drafts after token_ids (fewer where the KV pool has no block for their positions)."""
        waiting = self.waiting.get(request_id)
        length = len(token_ids)
        if waiting is None or num_drafts < 1 or waiting.start > length - 2:
            return []
        ready = waiting.hidden[: length - 1 - waiting.start]  # positions start..L-2: accepted by the model
        if ready.shape[0] != length - 1 - waiting.start:  # a stretch the model has not handed over: no drafts
            del self.waiting[request_id]
            return []
        seq = waiting.seq
        num_drafts = self.reserve(seq, length, num_drafts)
        if num_drafts < 1:
            return []
        del self.waiting[request_id]
        try:
            return self.draft_tokens(seq, token_ids[waiting.start + 1 : length], ready, waiting.start, num_drafts)
        except torch.OutOfMemoryError:  # the draft layer ran out of device memory: this step verifies no drafts
            self.num_failures += 1
            return []

    @torch.inference_mode()
    def draft_tokens(self, seq, next_tokens: list[int], ready: torch.Tensor, start: int, num_drafts: int):
        """The catch-up over the accepted positions, then one draft-layer step per further draft; the drafts stay
        on the device until the last is drawn (one host sync)."""
        ids = torch.tensor(next_tokens, dtype=torch.long, device=ready.device)
        hidden, head_input = self.run(seq, ids, ready, start)
        drafts = [torch.argmax(self.draft.logits(head_input[-1:]), dim=-1)]  # [1]
        hidden = hidden[-1:]
        positions = range(start + len(next_tokens), start + len(next_tokens) - 1 + num_drafts)
        if self.steps is not None and len(positions):
            drafts += self.steps.drafts(self.slots(seq, positions.stop), drafts[-1], hidden, positions)
            return torch.cat(drafts).tolist()
        for position in positions:
            hidden, head_input = self.run(seq, drafts[-1], hidden, position)
            drafts.append(torch.argmax(self.draft.logits(head_input), dim=-1))
        return torch.cat(drafts).tolist()

    def reserve(self, seq, length: int, num_drafts: int) -> int:
        """KV blocks for the draft steps' positions (the verify step's need more: they are reserved too)."""
        blocks = self.blocks
        while num_drafts and blocks.blocks_needed(length + num_drafts) - len(seq.block_table) > blocks.num_free_blocks:
            num_drafts -= 1
        blocks.reserve(seq, length + num_drafts)
        return num_drafts

    def run(self, seq, next_tokens: torch.Tensor, hidden: torch.Tensor, start: int):
        """The draft layer at positions start.. of seq (next_tokens [n]: the token after each) -> its outputs."""
        device, count = hidden.device, next_tokens.shape[0]
        end = start + count
        slots = torch.from_numpy(self.slots(seq, end)).to(device)
        meta = AttentionMetadata(slot_mapping=slots[start:], spans=[SeqSpan(0, count, slots)])
        positions = torch.arange(start, end, device=device)
        return self.draft.forward(next_tokens, hidden, positions, meta)

    def slots(self, seq, end: int) -> np.ndarray:
        """The KV slots [end] of seq's positions 0..end-1."""
        size = self.blocks.block_size
        return (np.asarray(seq.block_table, dtype=np.int64)[:, None] * size + np.arange(size)).reshape(-1)[:end]
