"""Speculative decoding in the engine is lossless: with prompt-lookup drafts verified k+1 positions a step, greedy
token ids equal those without drafting, logprobs within 1e-4, in every architecture (hybrid linear-attention ones
roll their state back) and every expert mode, alone and batched."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.engine.test_expert_modes import mode_options

# Prompts that repeat themselves, so that drafts are found and both accepted and rejected.
PROMPTS = ["def add(a, b):\n    return a + b\n\ndef add(a, b):\n", "one two three one two three one two",
           "x = [1, 2, 3]\ny = [1, 2, 3]\nz = [1, 2", "héllo wörld héllo wörld héllo"]
GREEDY = SamplingParams(max_tokens=24, ignore_eos=True)


def run(folder, prompts=PROMPTS, sampling=GREEDY, **options):
    """-> (token ids and logprobs of each prompt run alone then all batched, drafts proposed, drafts accepted)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=prompts[0], sampling=sampling))]
        handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=sampling) for p in prompts])
        results += [h.result() for h in handles]
    assert all(r.error is None for r in results), [r.error for r in results]
    proposed = sum(r.stats.spec_proposed for r in results)
    accepted = sum(r.stats.spec_accepted for r in results)
    return [(r.token_ids, r.logprobs) for r in results], proposed, accepted


def assert_same(drafted, plain):
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)


def test_greedy_drafting_is_lossless(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    plain, proposed, _ = run(folder)
    assert proposed == 0
    drafted, proposed, accepted = run(folder, speculative="ngram", draft_tokens=4)
    assert_same(drafted, plain)
    assert 0 < accepted < proposed  # drafts were both taken and refused (refusals roll back)


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen3_5_moe"])
def test_lossless_in_every_expert_mode(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    plain, _, _ = run(folder, prompts=PROMPTS[:2])
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        drafted, _, accepted = run(folder, prompts=PROMPTS[:2], speculative="ngram", **options)
        assert accepted > 0, name
        assert_same(drafted, plain)


def test_rows_that_cannot_draft_decode_beside_rows_that_do(tiny_model_dir):
    """A penalised row decodes one token a step in the same steps as drafting rows; both as without drafting."""
    folder = tiny_model_dir("qwen3_moe")
    penalised = SamplingParams(max_tokens=16, ignore_eos=True, repetition_penalty=1.3)

    def outputs(**options):
        with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
            handles = engine.submit_batch([GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY),
                                           GenerateRequest(prompt=PROMPTS[1], sampling=penalised)])
            return [h.result() for h in handles]

    plain, drafted = outputs(), outputs(speculative="ngram")
    assert [r.token_ids for r in drafted] == [r.token_ids for r in plain]
    assert drafted[0].stats.spec_accepted > 0 and drafted[1].stats.spec_proposed == 0


def test_seeded_sampling_runs_and_is_repeatable(tiny_model_dir):
    folder = tiny_model_dir("qwen3_5_moe")
    seeded = SamplingParams(max_tokens=24, temperature=0.7, seed=3, ignore_eos=True)
    first, proposed, _ = run(folder, prompts=PROMPTS[:2], sampling=seeded, speculative="ngram")
    again, _, _ = run(folder, prompts=PROMPTS[:2], sampling=seeded, speculative="ngram")
    assert proposed > 0 and first == again
