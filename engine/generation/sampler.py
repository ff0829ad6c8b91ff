"""Next-token choice from fp32 logits, built from small composable filters. Each row samples with its own
generator, so a sequence's tokens do not depend on which other sequences share the batch."""

from __future__ import annotations

import torch

from engine.generation.logits_processors import RowContext, apply_min_p, process_row
from engine.sampling import SamplingParams

FAILED_TOKEN = -1  # a row whose sampling raised: its request ends with an error, the rest of the batch goes on


def apply_top_k(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    threshold = torch.topk(logits, top_k).values[-1]
    return logits.masked_fill(logits < threshold, float("-inf"))


def apply_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability mass reaches top_p (the top token always stays)."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p
    drop_sorted[0] = False  # a top_p that rounds to 0 in fp32 (1e-300) would drop every token
    drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sample_row(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> torch.Tensor:
    """logits [V] -> token id tensor [1]."""
    filtered = apply_min_p(logits / params.temperature, params.min_p)
    scaled = apply_top_p(apply_top_k(filtered, params.top_k), params.top_p)
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def sample(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None],
           contexts: list[RowContext | None] | None = None) -> tuple[list[int], list[float]]:
    """logits [B, V] fp32, each row's params, generator and (for penalties, bias or a grammar) context ->
    (token ids, their log-probabilities under the unmodified model distribution). A row whose sampling
    raises (NaN logits) gets FAILED_TOKEN."""
    tokens, logprobs = sample_tensors(logits, params, generators, contexts)
    return tokens.tolist(), logprobs.tolist()


def sample_tensors(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None],
                   contexts: list[RowContext | None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """sample() without reading the result back: (token ids [B] long, their log-probabilities [B] fp32) on the
    logits' device, queued behind the step that made the logits (on CUDA nothing here waits for the GPU, unless a
    row's context does)."""
    tokens = torch.argmax(logits, dim=-1)  # [B]
    for row, (row_params, generator) in enumerate(zip(params, generators)):
        context = contexts[row] if contexts else None
        row_logits = logits[row] if context is None else process_row(logits[row], row_params, context)
        if not row_params.is_greedy:
            try:
                tokens[row] = sample_row(row_logits, row_params, generator)[0]
            except RuntimeError:  # torch.multinomial refusing NaN or all-zero probabilities
                tokens[row] = FAILED_TOKEN
        elif context is not None:
            tokens[row] = torch.argmax(row_logits)
    logprobs = torch.log_softmax(logits, dim=-1).gather(1, tokens.clamp(min=0)[:, None])[:, 0]  # [B]
    return tokens, logprobs
