"""What changes one sequence's logits before its next token is chosen: repetition, presence and frequency
penalties, logit_bias, min_p, and a grammar's mask of allowed tokens. Each works on one row [V] with the same
operations whatever else shares the batch, so a seeded request gives the same tokens beside any batch and in
every expert mode (the logits themselves are bitwise identical across modes)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.errors import RequestError
from engine.sampling import SamplingParams


@dataclass
class RowContext:
    """What a row's processors read: the sequence's tokens so far and, under a grammar, its allowed tokens."""

    token_ids: list[int]  # prompt then output
    num_prompt_tokens: int
    allowed: torch.Tensor | None = None  # bool [V] on the logits' device; None: no grammar

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]


def apply_repetition_penalty(logits: torch.Tensor, token_ids: list[int], penalty: float) -> torch.Tensor:
    """Every token of the prompt and the output: a positive logit divided by the penalty, a negative one
    multiplied (transformers' RepetitionPenaltyLogitsProcessor, vLLM's repetition_penalty)."""
    if penalty == 1.0 or not token_ids:
        return logits
    ids = torch.tensor(sorted(set(token_ids)), device=logits.device)
    seen = logits[ids]
    logits = logits.clone()
    logits[ids] = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits


def apply_presence_frequency(logits: torch.Tensor, output_ids: list[int], presence: float,
                             frequency: float) -> torch.Tensor:
    """OpenAI's penalties over the tokens generated so far: frequency times the count, plus presence once."""
    if not (presence or frequency) or not output_ids:
        return logits
    counts = torch.bincount(torch.tensor(output_ids, device=logits.device), minlength=logits.shape[-1])
    counts = counts[: logits.shape[-1]].to(logits.dtype)  # [V]
    return logits - frequency * counts - presence * (counts > 0).to(logits.dtype)


def apply_logit_bias(logits: torch.Tensor, bias: tuple[tuple[int, float], ...]) -> torch.Tensor:
    bias = tuple((token_id, value) for token_id, value in bias if token_id < logits.shape[-1])  # never index past V
    if not bias:
        return logits
    ids = torch.tensor([token_id for token_id, _ in bias], device=logits.device)
    values = torch.tensor([value for _, value in bias], device=logits.device, dtype=logits.dtype)
    return logits.index_add(0, ids, values)


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens less likely than min_p times the most likely one (after temperature)."""
    if min_p <= 0.0:
        return logits
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(probs < min_p * probs.max(), float("-inf"))


def apply_allowed(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    if allowed is None:
        return logits
    return logits.masked_fill(~allowed[: logits.shape[-1]], float("-inf"))


def process_row(logits: torch.Tensor, params: SamplingParams, context: RowContext | None) -> torch.Tensor:
    """logits [V] -> the logits the token is chosen from: penalties, bias, then the grammar's mask."""
    if context is None:
        return logits
    logits = apply_repetition_penalty(logits, context.token_ids, params.repetition_penalty)
    logits = apply_presence_frequency(logits, context.output_ids, params.presence_penalty, params.frequency_penalty)
    logits = apply_logit_bias(logits, params.logit_bias)
    return apply_allowed(logits, context.allowed)


def top_alternatives(logits: torch.Tensor, params: list[SamplingParams]) -> list[tuple[tuple[int, float], ...]]:
    """logits [B, V] -> each row's top_logprobs most likely (token id, log-probability) under the model's own
    distribution (as the chosen token's logprob), most likely first; () for rows that asked for none."""
    return alternatives_of(top_alternative_tensors(logits, params), params)


def top_alternative_tensors(logits: torch.Tensor, params: list[SamplingParams]) -> tuple[torch.Tensor, ...]:
    """top_alternatives() without reading back: (log-probabilities [B, k], token ids [B, k]) on the logits' device,
    or () when no row asked for any."""
    wanted = max((p.top_logprobs for p in params), default=0)
    if not wanted:
        return ()
    return torch.log_softmax(logits, dim=-1).topk(wanted, dim=-1)  # [B, k] each


def alternatives_of(tensors: tuple[torch.Tensor, ...], params: list[SamplingParams]
                    ) -> list[tuple[tuple[int, float], ...]]:
    """top_alternative_tensors()' result (read back here, or already on the host) -> top_alternatives()' lists."""
    if not tensors:
        return [()] * len(params)
    values, ids = tensors[0].tolist(), tensors[1].tolist()
    return [tuple(zip(ids[row][: p.top_logprobs], values[row][: p.top_logprobs])) for row, p in enumerate(params)]


def check_token_ids_in_vocabulary(params: SamplingParams, vocab_size: int | None) -> None:
    """logit_bias ids past the vocabulary would fail the whole batch's step, not just this request."""
    if vocab_size is None:
        return
    outside = next((token_id for token_id, _ in params.logit_bias if token_id >= vocab_size), None)
    if outside is not None:
        raise RequestError(f"logit_bias token id {outside} is outside the vocabulary (0..{vocab_size - 1})",
                           "logit_bias")
