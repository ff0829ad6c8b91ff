"""A stated acceptance for benchmarks on random weights, whose drafts the model would never accept: each draft is
taken with probability `rate` given the ones before it were (the geometric model of draft_length), the verify
step still computing every drafted position. Rows measured this way assume the acceptance; they say so."""

from __future__ import annotations

import random
import time

import torch


class AcceptanceReplay:
    def __init__(self, rate: float, seed: int = 0):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"an acceptance rate is 0 to 1, got {rate}")
        self.rate = rate
        self.random = random.Random(seed)

    def drafts(self, vocab_size: int, num_drafts: int) -> list[int]:
        return [self.random.randrange(vocab_size) for _ in range(num_drafts)]

    def tokens(self, logits: torch.Tensor, drafts: list[int]) -> tuple[list[int], list[float]]:
        """logits [k+1, V] -> (the accepted drafts then the model's argmax after them, their log-probabilities)."""
        num_accepted = 0
        while num_accepted < len(drafts) and self.random.random() < self.rate:
            num_accepted += 1
        last = int(torch.argmax(logits[num_accepted]))
        tokens = drafts[:num_accepted] + [last]
        rows = torch.arange(len(tokens), device=logits.device)
        chosen = torch.tensor(tokens, device=logits.device)
        return tokens, torch.log_softmax(logits[: len(tokens)], dim=-1)[rows, chosen].tolist()


class ReplayedDrafter:
    """A draft layer with random weights (benchmarks) run at every proposal for its cost, whose drafts are then
    replaced by the replay's, as many as it drew: the step pays the drafter's time while the acceptance stays the
    stated one. drafter: an engine.generation.speculative.mtp.MtpDrafter (observe, propose, forget)."""

    def __init__(self, drafter, replay: AcceptanceReplay, vocab_size: int):
        self.drafter, self.replay, self.vocab_size = drafter, replay, vocab_size
        self.num_drafted, self.drafting_s = 0, 0.0  # drafts the draft layer drew and its seconds, over every run

    def propose(self, request_id: str, token_ids: list[int], num_drafts: int) -> list[int]:
        started = time.perf_counter()
        count = len(self.drafter.propose(request_id, token_ids, num_drafts))  # read back: its time is all in
        self.num_drafted, self.drafting_s = self.num_drafted + count, self.drafting_s + time.perf_counter() - started
        return self.replay.drafts(self.vocab_size, count)

    def forget(self, request_id: str) -> None:
        self.drafter.forget(request_id)
