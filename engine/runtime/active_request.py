"""A request the engine runs: its scheduler sequence beside its output state, and what the sampler reads for it
(engine thread)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.generation.grammar import GrammarMatcher
from engine.generation.logits_processors import RowContext
from engine.generation.request_state import RequestState
from engine.runtime.sequence import Sequence


@dataclass
class Active:
    seq: Sequence  # what the scheduler and the runner see
    state: RequestState  # the output, its events and stats; its generator is on the engine's device
    grammar: GrammarMatcher | None = None  # structured output: where the reply is in its JSON schema
    drafts: bool = False  # speculative decoding: its decode steps verify drafts


def row_context(active: Active, width: int, device: torch.device) -> RowContext | None:
    """What the sampler's processors read for this row; None when nothing changes its logits."""
    seq = active.seq
    if not seq.sampling.changes_logits and active.grammar is None:
        return None
    allowed = active.grammar.allowed(width, device) if active.grammar is not None else None
    return RowContext(seq.token_ids, seq.num_prompt_tokens, allowed)
