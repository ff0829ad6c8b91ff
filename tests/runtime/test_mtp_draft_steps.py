"""The draft layer's drafts after a proposal's first through static buffers (engine.generation.speculative.
draft_graphs: CUDA graphs on CUDA, the same buffers run eagerly here) equal the eager path's, token for token, in
every proposal of alone and batched requests; the greedy ids stay those of --speculative off."""

from __future__ import annotations

import itertools

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.generation.speculative.draft_graphs import DraftSteps
from engine.generation.speculative.mtp import MtpDrafter
from tests.mtp_checkpoints import mtp_model_dir  # noqa: F401 - the fixture

PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two", "héllo wörld"]
GREEDY = SamplingParams(max_tokens=16, ignore_eos=True)
DRAFT_COUNTS = [4, 1, 3, 0, 2]  # the draft-length rule's choices, in turn


def compare_drafts(drafter: MtpDrafter, steps: DraftSteps) -> list[tuple[list[int], list[int]]]:
    """Every proposal drafts twice, eagerly then through steps (the KV the first wrote is written again), and
    verifies the second's drafts -> the (eager, static) pairs, filled as the engine drafts."""
    pairs = []

    def both(seq, next_tokens, ready, start, num_drafts):
        drafter.steps = None
        eager = MtpDrafter.draft_tokens(drafter, seq, next_tokens, ready, start, num_drafts)
        drafter.steps = steps
        static = MtpDrafter.draft_tokens(drafter, seq, next_tokens, ready, start, num_drafts)
        pairs.append((eager, static))
        return static

    drafter.draft_tokens = both
    return pairs


def run_compared(folder, device: str, use_graphs: bool, **options):
    """-> (greedy ids of each result, the (eager, static) draft pairs, the DraftSteps); None for steps: off."""
    speculative = options.pop("speculative", "mtp")
    with Engine(EngineOptions(model=str(folder), device=device, speculative=speculative, **options)) as engine:
        core, pairs, steps = engine._core, [], None
        if speculative == "mtp":
            drafter = core.speculation.drafter
            dtype = drafter.draft.layer.proj.weight.dtype
            steps = DraftSteps(drafter.draft, core.max_model_len, torch.device(device), dtype, use_graphs)
            pairs = compare_drafts(drafter, steps)
            counts = itertools.cycle(DRAFT_COUNTS)
            core.speculation.draft_length.choose = lambda: next(counts)
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))]
        results += [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                             for p in PROMPTS])]
    assert all(r.error is None for r in results), [r.error for r in results]
    return [list(r.token_ids) for r in results], pairs, steps


def assert_static_drafts_equal_eager(pairs):
    assert sum(len(eager) >= 2 for eager, _ in pairs) >= 3, pairs  # proposals that ran static steps
    for eager, static in pairs:
        assert static == eager


@pytest.mark.parametrize("model_type", ["qwen3_5_moe", "deepseek_v3", "glm4_moe"])
def test_static_draft_steps_draw_the_eager_drafts(mtp_model_dir, model_type):  # noqa: F811
    folder = mtp_model_dir(model_type)
    plain, _, _ = run_compared(folder, "cpu", False, speculative="off")
    drafted, pairs, steps = run_compared(folder, "cpu", False)
    assert_static_drafts_equal_eager(pairs)
    assert steps.captures == 0 and steps.graph is None  # no graphs off CUDA
    assert drafted == plain


def test_draft_positions_past_the_context_are_refused(mtp_model_dir):  # noqa: F811
    with Engine(EngineOptions(model=str(mtp_model_dir("glm4_moe")), device="cpu", speculative="mtp")) as engine:
        drafter = engine._core.speculation.drafter
        steps = DraftSteps(drafter.draft, 8, torch.device("cpu"), torch.float32, use_graphs=False)
        with pytest.raises(ValueError, match="do not fit a context of 8"):
            steps.drafts(torch.arange(16).numpy(), torch.zeros(1, dtype=torch.long),
                         torch.zeros(1, drafter.draft.model.args.hidden_size), range(6, 10))


class RecordedGraph:
    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


def test_a_reallocated_kv_pool_drops_the_graph(mtp_model_dir):  # noqa: F811
    """A re-split reallocates the KV pools: the graph read the old ones, so the next drafts run (and capture) anew."""
    with Engine(EngineOptions(model=str(mtp_model_dir("glm4_moe")), device="cpu", speculative="mtp")) as engine:
        drafter = engine._core.speculation.drafter
        steps = DraftSteps(drafter.draft, 64, torch.device("cpu"), torch.float32, use_graphs=False)
        D = drafter.draft.model.args.hidden_size
        inputs = (torch.arange(64).numpy(), torch.zeros(1, dtype=torch.long), torch.zeros(1, D), range(3, 5))
        steps.graph = graph = RecordedGraph()
        steps.meta.kv_index.fill_(63)
        steps.drafts(*inputs)
        assert graph.replays == 2  # the same pools: replayed per draft
        for pool in drafter.draft.cache.pools():
            pool[-1] = pool[-1].clone()
        steps.drafts(*inputs)
        assert graph.replays == 2 and steps.graph is None
        assert steps.meta.kv_index[0, 5:].eq(0).all()  # past the context: slot 0, within any pool
