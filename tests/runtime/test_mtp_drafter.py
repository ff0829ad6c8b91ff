"""The MTP drafter's bookkeeping, with a stand-in draft layer that predicts `next token + 1`: which positions and
tokens the draft layer runs on, how hidden states wait between steps, and that a stretch the model has not handed
over gives no drafts (instead of a draft layer run on misaligned inputs)."""

from __future__ import annotations

import torch

from engine.generation.speculative.mtp import MtpDrafter
from engine.kv.block_manager import BlockManager
from engine.runtime.sequence import Sequence
from engine.sampling import SamplingParams

VOCAB = 50


class CountingDraft:
    """Logits whose argmax is the input token + 1; records (positions, tokens, hidden rows) of every run."""

    def __init__(self):
        self.runs = []

    def forward(self, token_ids, hidden, positions, meta):
        assert hidden.shape[0] == token_ids.shape[0] == positions.shape[0] == meta.slot_mapping.shape[0]
        self.runs.append((positions.tolist(), token_ids.tolist(), hidden[:, 0].tolist()))
        head_input = torch.nn.functional.one_hot((token_ids + 1) % VOCAB, VOCAB).float()  # [T, V]
        return hidden, head_input

    def logits(self, head_input):
        return head_input


def drafter_and_seq(num_tokens: int):
    draft, blocks = CountingDraft(), BlockManager(16, 4)
    seq = Sequence(request_id="r", token_ids=list(range(10, 10 + num_tokens)), sampling=SamplingParams())
    blocks.reserve(seq, num_tokens)
    return MtpDrafter(draft, blocks), seq, draft


def rows(first: int, count: int) -> torch.Tensor:
    """Hidden states [count, 2] whose first column names their position."""
    return torch.arange(first, first + count, dtype=torch.float32)[:, None].expand(count, 2).clone()


def test_the_first_draft_follows_the_accepted_positions_then_each_draft_the_one_before():
    drafter, seq, draft = drafter_and_seq(5)
    drafter.observe(seq, 0, rows(0, 4))  # a prompt of 4 tokens computed; its next token (the 5th) sampled
    assert drafter.propose("r", seq.token_ids, 3) == [15, 16, 17]
    assert draft.runs[0] == ([0, 1, 2, 3], [11, 12, 13, 14], [0.0, 1.0, 2.0, 3.0])
    assert [run[:2] for run in draft.runs[1:]] == [([4], [15]), ([5], [16])]
    assert len(seq.block_table) * 4 >= 5 + 3  # the verify step's positions have blocks


def test_hidden_states_wait_and_a_recomputed_stretch_replaces_what_waited():
    drafter, seq, draft = drafter_and_seq(5)
    drafter.observe(seq, 0, rows(0, 3))
    drafter.observe(seq, 3, rows(3, 2))  # a plain decode step: appended
    drafter.observe(seq, 2, rows(20, 2))  # positions 2..3 again (rejected drafts recomputed): replaced
    assert drafter.propose("r", seq.token_ids, 1) == [15]
    assert draft.runs == [([0, 1, 2, 3], [11, 12, 13, 14], [0.0, 1.0, 20.0, 21.0])]


def test_no_drafts_where_the_model_has_not_handed_over_every_position():
    drafter, seq, draft = drafter_and_seq(6)
    drafter.observe(seq, 0, rows(0, 3))  # positions 3 and 4 never handed over
    assert drafter.propose("r", seq.token_ids, 4) == []
    assert draft.runs == []


def test_a_sequence_that_does_not_draft_keeps_nothing():
    drafter, seq, _ = drafter_and_seq(5)
    drafter.wants = lambda seq: False
    drafter.observe(seq, 0, rows(0, 4))
    assert drafter.waiting == {}


def test_a_draft_layer_out_of_device_memory_gives_no_drafts_and_the_step_goes_on():
    drafter, seq, draft = drafter_and_seq(5)

    def out_of_memory(*args):
        raise torch.OutOfMemoryError("CUDA out of memory")

    draft.forward = out_of_memory
    drafter.observe(seq, 0, rows(0, 4))
    assert drafter.propose("r", seq.token_ids, 3) == []
    assert drafter.num_failures == 1
