"""The draft layer's single-position steps (every draft after a proposal's first, engine.generation.speculative.mtp)
with static shapes: one row reads its token, hidden state, position, KV slot and padded context from fixed buffers
and writes its chained hidden state and its argmax token to others, so on CUDA the step is one CUDA graph (captured
after one eager step, as engine.runtime.decode_graphs captures the model's decode steps), replayed per draft. The
drafts stay on the device until the proposal's last (one host sync). Without graphs (the CPU) the same buffers run
eagerly.

Shape legend: D hidden, L max_len (the padded context)."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.attention import PaddedDecodeMetadata
from engine.model.mtp import DraftModel


class DraftSteps:
    """The buffers and the graph of a drafter's one-row step; every sequence drafts through them in turn."""

    def __init__(self, draft: DraftModel, max_len: int, device: torch.device, dtype: torch.dtype, use_graphs: bool):
        D = draft.model.args.hidden_size
        self.draft, self.max_len, self.use_graphs = draft, max_len, use_graphs
        self.token = torch.zeros(1, dtype=torch.long, device=device)  # the token at q+1
        self.hidden = torch.zeros(1, D, dtype=dtype, device=device)  # the chained hidden state at q
        self.position = torch.zeros(1, dtype=torch.long, device=device)  # q
        self.meta = PaddedDecodeMetadata(slot_mapping=torch.zeros(1, dtype=torch.long, device=device),
                                         kv_index=torch.zeros(1, max_len, dtype=torch.long, device=device),  # [1, L]
                                         lengths=torch.zeros(1, dtype=torch.long, device=device))
        self.out_token = torch.zeros(1, dtype=torch.long, device=device)
        self.out_hidden = torch.zeros_like(self.hidden)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.captures = 0
        self.pools = self.pool_addresses()  # the KV tensors the graph reads: a re-split reallocates them

    def drafts(self, slots: np.ndarray, token: torch.Tensor, hidden: torch.Tensor,
               positions: range) -> list[torch.Tensor]:
        """slots [>= positions' end]: the sequence's KV slot of each position; token [1] and hidden [1, D]: the
        first step's inputs (the proposal's first draft and the catch-up's last chained state) -> one argmax [1]
        per position, on the device."""
        if positions.stop > self.max_len:
            raise ValueError(f"draft positions up to {positions.stop} do not fit a context of {self.max_len}")
        self.follow_pools()
        # only the context's slots: what lies past them (slot 0, or an earlier sequence's slots) is masked by the length
        self.meta.kv_index[0, : positions.stop].copy_(torch.from_numpy(slots[: positions.stop]))
        self.token.copy_(token)
        self.hidden.copy_(hidden)
        drafts = []
        for position in positions:
            self.position.fill_(position)
            self.meta.slot_mapping.fill_(int(slots[position]))
            self.meta.lengths.fill_(position + 1)
            self.step()
            drafts.append(self.out_token.clone())
            self.token.copy_(self.out_token)
            self.hidden.copy_(self.out_hidden)
        return drafts

    def pool_addresses(self) -> tuple[int, ...]:
        return tuple(pool[-1].data_ptr() for pool in self.draft.cache.pools())  # the draft layer's, appended last

    def follow_pools(self) -> None:
        """After the KV cache was reallocated (a re-split): the graph read the old tensors and kv_index may hold
        slots past the new pool's end, so the graph is captured again and the index starts from slot 0."""
        pools = self.pool_addresses()
        if pools != self.pools:
            self.graph, self.pools = None, pools
            self.meta.kv_index.zero_()

    def step(self) -> None:
        if self.graph is not None:
            self.graph.replay()
            return
        self.compute()
        if self.use_graphs:
            self.capture()  # after one eager step: every buffer holds valid data, every kernel is built

    @torch.inference_mode()
    def compute(self) -> None:
        chained, head_input = self.draft.forward_padded(self.token, self.hidden, self.position, self.meta)
        self.out_hidden.copy_(chained)
        self.out_token.copy_(torch.argmax(self.draft.logits(head_input), dim=-1))

    def capture(self) -> None:
        """The step once more on a side stream (it writes the same KV and outputs again), then captured."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.compute()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.compute()
        self.graph, self.captures = graph, self.captures + 1
