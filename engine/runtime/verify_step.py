"""A decode step that verifies drafts (speculative decoding, engine thread): each sequence computes its last
token's position and its drafts' in one model step; its emitted tokens are accepted one by one as a plain decode
step's are, and what follows the last accepted position is dropped: the KV written there is overwritten by later
steps (attention never reads past a sequence's length) and a linear-attention state is rolled back. The step runs
with static shapes (CUDA graphs), one row per position, on models whose layers are all attention and on the Gated
DeltaNet hybrids (a sequence's rows chain its states: engine.model.state_chains); other state layers verify eagerly
(ModelRunner.takes_padded)."""

from __future__ import annotations

import time
import torch

from engine.events import Event
from engine.generation.sampler import sample_tensors
from engine.generation.speculative.verify import verify_drafts
from engine.runtime.active_request import Active, row_context
from engine.runtime.sequence import Sequence


def can_draft(engine, seq: Sequence) -> bool:
    """Does the sequence's request draft? Rows whose logits depend on the tokens before them (penalties, bias, a
    grammar) or that ask for top alternatives decode one token a step."""
    active = engine.active.get(seq.request_id)
    return (active is not None and active.drafts and active.grammar is None and not seq.sampling.changes_logits
            and not seq.sampling.top_logprobs)


def propose_drafts(engine, seqs: list[Sequence]) -> bool:
    """Give the scheduled decode step's sequences their drafts, with KV blocks for their positions -> any?"""
    blocks = engine.scheduler.block_manager
    engine.speculation.step_drafting_s = 0.0
    for seq in seqs:
        if not can_draft(engine, seq):
            continue
        room = min(seq.sampling.max_tokens - seq.num_output_tokens, engine.max_model_len - len(seq.token_ids)) - 1
        drafts = engine.speculation.propose(seq.request_id, seq.token_ids, room)
        while drafts and blocks.blocks_needed(len(seq.token_ids) + len(drafts)) - len(seq.block_table) \
                > blocks.num_free_blocks:
            drafts = drafts[:-1]
        blocks.reserve(seq, len(seq.token_ids) + len(drafts))
        seq.draft_ids = drafts
    return any(seq.draft_ids for seq in seqs)


def run_verify_step(engine, seqs: list[Sequence], started: float) -> list[Event]:
    """The step's time, to the draft length rule, runs from started (the engine step's start: scheduling and prompt
    lookup included, as a plain step's time includes its host work; a drafter's seconds are counted apart) until
    its tokens are read back to the host (choose_tokens), so a graph replay is timed to the GPU's end. A step that
    captured graphs (a row count's first static step) is not timed: its capture is not what later steps of that
    length cost."""
    misses_before = engine.runner.experts.counters.misses
    captures_before = num_captures(engine)
    logits = engine.runner.run(seqs, False)  # [sum of 1 + drafts, V]
    results, row = [], 0
    for seq in seqs:
        num_rows = 1 + len(seq.draft_ids)
        results.append(choose_tokens(engine, engine.active[seq.request_id], logits[row : row + num_rows]))
        row += num_rows
    now = time.perf_counter()
    counters = engine.speculation.counters
    counters.num_verify_steps += 1
    counters.verify_misses += engine.runner.experts.counters.misses - misses_before
    if num_captures(engine) == captures_before:
        seconds = now - started - engine.speculation.step_drafting_s  # drafting is counted per draft apart
        engine.speculation.draft_length.observe_step(row / len(seqs), seconds)
    events: list[Event] = []
    for seq, (tokens, logprobs) in zip(seqs, results):
        events.extend(accept_verified(engine, engine.active[seq.request_id], tokens, logprobs, now))
    forget = getattr(engine.runner.cache, "forget_verified_states", None)
    if forget is not None:
        forget()
    engine.throughput.record(now, sum(len(tokens) for tokens, _ in results), False)
    return events


def num_captures(engine) -> int:
    graphs = engine.runner.padded_decode
    return 0 if graphs is None else graphs.capture_totals()[0]


def choose_tokens(engine, active: Active, logits: torch.Tensor) -> tuple[list[int], list[float]]:
    """logits [1 + drafts, V] of one sequence -> (its tokens to emit, their log-probabilities)."""
    seq, generator = active.seq, active.state.generator
    if seq.draft_ids and engine.speculation.replay is not None:
        return engine.speculation.replay.tokens(logits, seq.draft_ids)
    if seq.draft_ids:
        return verify_drafts(logits, seq.draft_ids, seq.sampling, generator)
    context = row_context(active, logits.shape[-1], logits.device)
    tokens, logprobs = sample_tensors(logits, [seq.sampling], [generator], [context])
    return tokens.tolist(), logprobs.tolist()


def accept_verified(engine, active: Active, tokens: list[int], logprobs: list[float],
                    now: float) -> list[Event]:
    """Accept a sequence's emitted tokens in order until one ends it; then drop what followed the last accepted
    position."""
    seq, drafts = active.seq, active.seq.draft_ids
    seq.draft_ids = []
    if drafts:
        num_accepted = len(tokens) - 1
        engine.speculation.observe(len(drafts), num_accepted)
        active.state.num_spec_proposed += len(drafts)
        active.state.num_spec_accepted += num_accepted
    events: list[Event] = []
    for token, logprob in zip(tokens, logprobs):
        events.extend(engine._accept_alone(active, token, logprob, now))
        if engine.active.get(seq.request_id) is not active:
            return events  # ended: its blocks and state slot are freed
    if drafts and len(tokens) - 1 < len(drafts):
        roll_back = getattr(engine.runner.cache, "roll_back", None)
        if roll_back is not None and seq.state_slot >= 0:
            roll_back(seq.state_slot, len(tokens) - 1)
    engine.scheduler.block_manager.register(seq, len(seq.token_ids) - 1)
    return events
