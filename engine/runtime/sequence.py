"""One generation in flight as the scheduler sees it: its tokens, KV block table and sampling parameters
(torch-free; the engine keeps each sequence's random generator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from engine.sampling import SamplingParams


class SeqStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass
class Sequence:
    request_id: str
    token_ids: list[int]
    sampling: SamplingParams
    num_prompt_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0
    status: SeqStatus = SeqStatus.WAITING
    num_preemptions: int = 0
    state_slot: int = -1  # its row in a hybrid model's linear-attention state cache while it holds KV blocks
    # The rows of the prompt step now scheduled: positions prefill_start..prefill_end-1 (a chunk of a long prompt,
    # or all of it); is_prefilling while the positions after prefill_end are still to be computed.
    prefill_start: int = 0
    prefill_end: int = 0
    is_prefilling: bool = False
    # Drafts of the tokens after token_ids' last, verified by the next decode step (speculative decoding): that step
    # computes the last token's position and theirs, and they are dropped once it is read.
    draft_ids: list[int] = field(default_factory=list)
    # A prompt's images (engine.vision.prompt_images.PromptImages): their tokens' embeddings, M-RoPE positions and
    # prefix-cache keys; None for text.
    images: object = None

    def __post_init__(self):
        self.num_prompt_tokens = len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SeqStatus.FINISHED
