"""A decode step the draft-length rule gives no drafts runs as a plain one does: launched ahead of the step before it
(overlap), its host work hidden behind the GPU's. Tokens and logprobs stay those of --speculative off (greedy),
through steps that go ahead, verify steps with drafts, and the switches between them; the prompt-lookup and the
draft-layer (MTP) drafters both, whose bookkeeping follows plain steps too. Overlap runs on CUDA; here it is forced
on the CPU, where it reorders the same work."""

from __future__ import annotations

import itertools

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.mtp_checkpoints import mtp_model_dir  # noqa: F401 - the fixture

PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two three one two"]
GREEDY = SamplingParams(max_tokens=20, ignore_eos=True)


def run(folder, lengths=None, overlap=False, **options):
    """Each prompt alone, then both batched -> (ids and logprobs of each result, steps launched ahead, drafts)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", **options)) as engine:
        core = engine._core
        core.overlap = overlap
        if lengths is not None:
            core.speculation.draft_length.choose = lambda: next(lengths)
        results = [engine.generate(GenerateRequest(prompt=prompt, sampling=GREEDY)) for prompt in PROMPTS]
        results += [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                             for p in PROMPTS])]
        ahead, proposed = core.steps_ahead, sum(r.stats.spec_proposed for r in results)
    assert all(r.error is None for r in results), [r.error for r in results]
    return [(list(r.token_ids), list(r.logprobs)) for r in results], ahead, proposed


def assert_same(drafted, plain):
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)


@pytest.mark.parametrize("model_type,speculative", [("qwen3_5_moe", "mtp"), ("deepseek_v3", "mtp"),
                                                    ("qwen3_5_moe", "ngram")])
def test_declined_steps_go_ahead_with_the_tokens_of_off(mtp_model_dir, model_type, speculative):  # noqa: F811
    folder = mtp_model_dir(model_type)
    plain, _, _ = run(folder)
    lengths = itertools.cycle([0, 0, 3, 0, 0, 0, 2, 1, 0, 0, 4, 0])
    drafted, ahead, proposed = run(folder, lengths, overlap=True, speculative=speculative)
    assert_same(drafted, plain)
    assert ahead > 0  # declined steps went ahead
    if speculative == "mtp":
        assert proposed > 0  # and the rest verified drafts (prompt lookup may find none to propose)


def test_a_rule_that_always_drafts_launches_nothing_ahead(mtp_model_dir):  # noqa: F811
    folder = mtp_model_dir("qwen3_5_moe")
    plain, _, _ = run(folder)
    drafted, ahead, proposed = run(folder, itertools.repeat(2), overlap=True, speculative="mtp")
    assert_same(drafted, plain)
    assert ahead == 0 and proposed > 0
