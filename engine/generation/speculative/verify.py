"""Verification of one sequence's drafts from the model's logits at its k+1 verified positions: the tokens it
emits are distributed exactly as decoding one token a step would emit them.

Greedy: the argmax at each position, up to and including the first that differs from the draft. Sampling
(speculative rejection sampling with a deterministic draft q = one-hot(d)): the draft d is accepted with
probability min(1, p(d) / q(d)) = p(d); on rejection the token is drawn from the residual max(p - q, 0),
normalised, which is p with d removed; when every draft is accepted one more token is drawn from the last
position's p. p is the distribution sample_row draws from (temperature, min-p, top-k, top-p)."""

from __future__ import annotations

import torch

from engine.generation.logits_processors import apply_min_p
from engine.generation.sampler import FAILED_TOKEN, apply_top_k, apply_top_p, sample_row
from engine.sampling import SamplingParams


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """logits [V] -> the distribution sample_row draws from [V]."""
    filtered = apply_min_p(logits / params.temperature, params.min_p)
    return torch.softmax(apply_top_p(apply_top_k(filtered, params.top_k), params.top_p), dim=-1)


def greedy_tokens(logits: torch.Tensor, drafts: list[int]) -> list[int]:
    best = torch.argmax(logits, dim=-1).tolist()  # [k+1]
    for position, draft in enumerate(drafts):
        if best[position] != draft:
            return best[: position + 1]
    return best


def sampled_tokens(logits: torch.Tensor, drafts: list[int], params: SamplingParams,
                   generator: torch.Generator | None) -> list[int]:
    tokens = []
    for position, draft in enumerate(drafts):
        probs = probabilities(logits[position], params)  # [V]
        uniform = torch.rand((), generator=generator, device=logits.device)
        if uniform < probs[draft]:
            tokens.append(draft)
            continue
        residual = probs.clone()
        residual[draft] = 0.0
        tokens.append(int(torch.multinomial(residual, 1, generator=generator)[0]))
        return tokens
    tokens.append(int(sample_row(logits[len(drafts)], params, generator)[0]))
    return tokens


def verify_drafts(logits: torch.Tensor, drafts: list[int], params: SamplingParams,
                  generator: torch.Generator | None) -> tuple[list[int], list[float]]:
    """logits [k+1, V] fp32 at the positions of the last token and the k drafts -> (the 1..k+1 tokens to emit,
    their log-probabilities under the unmodified model distribution). A row whose scores are not numbers gives
    [FAILED_TOKEN]."""
    try:
        if params.is_greedy:
            tokens = greedy_tokens(logits, drafts)
        else:
            tokens = sampled_tokens(logits, drafts, params, generator)
    except RuntimeError:  # torch.multinomial refusing NaN or all-zero probabilities
        return [FAILED_TOKEN], [float("nan")]
    rows = torch.arange(len(tokens), device=logits.device)
    logprobs = torch.log_softmax(logits[: len(tokens)], dim=-1)[rows, torch.tensor(tokens, device=logits.device)]
    return tokens, logprobs.tolist()
