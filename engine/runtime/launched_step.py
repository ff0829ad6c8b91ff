"""A step whose model run and sampling are queued on the device, its tokens read back later: LLMEngine launches
the next decode step on these tokens before the host reads them (overlapped steps), so the host's work on one
token (reading it back, stop strings, detokenizing, the next step's inputs) runs while the GPU computes the next."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.generation.logits_processors import alternatives_of
from engine.runtime.sequence import Sequence
from engine.sampling import SamplingParams


@dataclass
class LaunchedStep:
    seqs: list[Sequence]  # in row order
    is_prefill: bool
    params: list[SamplingParams]
    tokens: torch.Tensor  # [B] on the device: what a step launched on this one reads as its inputs
    host: tuple[torch.Tensor, ...]  # tokens, logprobs and the top alternatives' tensors, on the host once ready
    ready: torch.cuda.Event | None  # recorded after the copies to the host (None: the step ran on the CPU)

    def read(self) -> tuple[list[int], list[float], list[tuple[tuple[int, float], ...]]]:
        """Wait for this step alone (not for a step launched after it) -> (tokens, logprobs, top alternatives)."""
        if self.ready is not None:
            self.ready.synchronize()
        tokens, logprobs, *alternatives = self.host
        return tokens.tolist(), logprobs.tolist(), alternatives_of(tuple(alternatives), self.params)


def read_back(tensors: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.cuda.Event | None]:
    """Queue copies of the tensors into pinned host memory behind the work that makes them -> (the host tensors,
    the event to wait on before reading them). On the CPU the tensors are the result."""
    if not tensors[0].is_cuda:
        return tensors, None
    host = tuple(torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True) for t in tensors)
    ready = torch.cuda.Event()
    ready.record()
    return host, ready
