"""Speculative decoding in the engine is lossless: drafts verified k+1 positions a step give the greedy token ids
of decoding without drafts, logprobs within 1e-4, in every architecture (hybrid linear-attention ones roll their
state back) and every expert mode, alone and batched.

The drafts here come from an oracle that knows the plain run's output and spoils some of its drafts, so that
every run has long accepted runs and rejections at known places whatever the tiny random model writes (prompt
lookup on a real text: tests/runtime/test_speculative_cli.py and the demo model's bench)."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options

PROMPTS = ["def add(a, b):\n    return a + b\n\ndef add(a, b):\n", "one two three one two three one two",
           "héllo wörld héllo wörld héllo"]
GREEDY = SamplingParams(max_tokens=16, ignore_eos=True)


class OracleDrafts:
    """Drafts the plain run's next tokens; every third call spoils its last draft (a rejection)."""

    def __init__(self, engine: Engine, reference: dict[str, list[int]]):
        self.core, self.reference, self.calls = engine._core, reference, 0

    def __call__(self, request_id: str, token_ids: list[int], max_tokens: int) -> list[int]:
        self.calls += 1
        done = len(token_ids) - self.core.active[request_id].seq.num_prompt_tokens
        drafts = self.reference[request_id][done : done + min(max_tokens, 4)]
        if drafts and self.calls % 3 == 0:
            drafts[-1] = (drafts[-1] + 1) % 50
        return drafts


def requests(prompts, sampling) -> list[GenerateRequest]:
    return [GenerateRequest(prompt=p, sampling=sampling, request_id=f"r{i}") for i, p in enumerate(prompts)]


def run(folder, prompts=PROMPTS, sampling=GREEDY, reference=None, **options):
    """Each prompt alone, then all batched -> ({request id: (token ids, logprobs)} of each pass, proposed, accepted)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        if reference is not None:
            engine._core.speculation.propose = OracleDrafts(engine, reference)
        alone = [engine.generate(r) for r in requests(prompts[:1], sampling)]
        batched = [h.result() for h in engine.submit_batch(requests(prompts, sampling))]
    results = alone + batched
    assert all(r.error is None for r in results), [r.error for r in results]
    outputs = [{r.request_id: (list(r.token_ids), list(r.logprobs)) for r in rs} for rs in (alone, batched)]
    return outputs, sum(r.stats.spec_proposed for r in results), sum(r.stats.spec_accepted for r in results)


def assert_lossless(folder, plain, prompts=PROMPTS, **options):
    reference = {rid: ids for rid, (ids, _) in plain[1].items()}
    drafted, proposed, accepted = run(folder, prompts, reference=reference, speculative="ngram", **options)
    for drafted_pass, plain_pass in zip(drafted, plain):
        for rid, (ids, logprobs) in plain_pass.items():
            assert drafted_pass[rid][0] == ids, rid
            assert drafted_pass[rid][1] == pytest.approx(logprobs, abs=1e-4), rid
    assert 0 < accepted < proposed  # long runs taken and drafts refused (a refusal rolls back)


def test_greedy_drafting_is_lossless(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    plain, proposed, _ = run(folder)
    assert proposed == 0
    assert_lossless(folder, plain)


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen3_5_moe"])
def test_lossless_in_every_expert_mode(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    plain, _, _ = run(folder, prompts=PROMPTS[:2])
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert_lossless(folder, plain, prompts=PROMPTS[:2], **options)


def test_rows_that_cannot_draft_decode_beside_rows_that_do(tiny_model_dir):
    """A penalised row decodes one token a step in the same steps as drafting rows; both as without drafting."""
    folder = tiny_model_dir("qwen3_moe")
    penalised = SamplingParams(max_tokens=16, ignore_eos=True, repetition_penalty=1.3)

    def outputs(**options):
        with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
            handles = engine.submit_batch([GenerateRequest(prompt=PROMPTS[1], sampling=GREEDY),
                                           GenerateRequest(prompt=PROMPTS[0], sampling=penalised)])
            return [h.result() for h in handles]

    plain, drafted = outputs(), outputs(speculative="ngram")
    assert [r.token_ids for r in drafted] == [r.token_ids for r in plain]
    assert drafted[0].stats.spec_proposed > 0 and drafted[1].stats.spec_proposed == 0


def test_seeded_sampling_is_repeatable(tiny_model_dir):
    folder = tiny_model_dir("qwen3_5_moe")
    seeded = SamplingParams(max_tokens=16, temperature=0.7, seed=3, ignore_eos=True)
    plain, _, _ = run(folder, prompts=PROMPTS[:2])
    reference = {rid: ids for rid, (ids, _) in plain[1].items()}
    first, proposed, _ = run(folder, PROMPTS[:2], seeded, reference=reference, speculative="ngram")
    again, _, _ = run(folder, PROMPTS[:2], seeded, reference=reference, speculative="ngram")
    assert proposed > 0 and first == again


@pytest.mark.slow  # ~30 s each (bf16 engines through interpreted Triton kernels): the README command's budget
@pytest.mark.parametrize("model_type", ["deepseek_v3", "qwen3_moe"])
def test_verify_rows_have_the_decode_steps_bits_in_bf16(tiny_model_dir, model_type):
    """With the Triton decode kernels (here under Triton's interpreter) a verify step's rows take the decode kernel,
    one position each (MLA's absorbed latent decode, GQA's paged decode): in bf16 the token ids and logprobs are
    bitwise those of one-token steps, where an SDPA prompt-path verify rounds differently and changes the tokens."""
    folder = tiny_model_dir(model_type)
    options = dict(dtype="bfloat16", attention="triton", decode="static")
    plain, _, _ = run(folder, **options)
    reference = {rid: ids for rid, (ids, _) in plain[1].items()}
    drafted, proposed, accepted = run(folder, reference=reference, speculative="ngram", **options)
    assert drafted == plain
    assert 0 < accepted < proposed
