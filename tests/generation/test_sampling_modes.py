"""The full sampling API keeps the token-exact promise: a seeded request with penalties, logit_bias, min_p, top_k,
top_logprobs and a JSON schema gives the same tokens, logprobs and alternatives in every expert mode and beside
any batch; and each parameter does what it says."""

from __future__ import annotations

import json

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import PROMPTS, mode_options

FULL = SamplingParams(max_tokens=16, temperature=0.9, top_k=30, top_p=0.95, min_p=0.02, repetition_penalty=1.3,
                      presence_penalty=0.4, frequency_penalty=0.3, logit_bias=((7, 4.0), (11, -100.0)), seed=5,
                      top_logprobs=3, ignore_eos=True)
SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}},
                     "required": ["a"], "additionalProperties": False})
STRUCTURED = SamplingParams(max_tokens=24, temperature=1.0, seed=9, json_schema=SCHEMA, top_logprobs=2)


def events(engine, request) -> tuple:
    tokens = [event for event in engine.submit(request) if hasattr(event, "top_logprobs")]
    return tuple((e.token_id, e.logprob, e.top_logprobs) for e in tokens)


def outputs(folder, device: str = "cpu", **options) -> list[tuple]:
    """Each sampling alone, then both beside greedy requests in one batch."""
    with Engine(EngineOptions(model=str(folder), device=device, **options)) as engine:
        results = [events(engine, GenerateRequest(prompt=PROMPTS[0], sampling=s)) for s in (FULL, STRUCTURED)]
        greedy = SamplingParams(max_tokens=16, ignore_eos=True)
        handles = engine.submit_batch([GenerateRequest(prompt=PROMPTS[0], sampling=FULL),
                                       GenerateRequest(prompt=PROMPTS[1], sampling=greedy),
                                       GenerateRequest(prompt=PROMPTS[0], sampling=STRUCTURED),
                                       GenerateRequest(prompt=PROMPTS[2], sampling=greedy)])
        batched = [h.result() for h in handles]
    assert all(r.error is None for r in batched), [r.error for r in batched]
    assert [t for t, _, _ in results[0]] == list(batched[0].token_ids)  # beside a batch, the same tokens
    assert [t for t, _, _ in results[1]] == list(batched[2].token_ids)
    return results


def test_full_sampling_is_bitwise_equal_in_every_expert_mode(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    reference = outputs(folder, experts="resident")
    assert all(len(top) == 3 for _, _, top in reference[0])
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, **options) == reference, name


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as eng:
        yield eng


def greedy(engine, **fields):
    sampling = SamplingParams(max_tokens=24, ignore_eos=True, **fields)
    return engine.generate(GenerateRequest(prompt=PROMPTS[1], sampling=sampling))


def test_logit_bias_bans_and_forces_tokens(engine):
    plain = greedy(engine)
    banned = greedy(engine, logit_bias=((plain.token_ids[0], -100.0),))
    assert plain.token_ids[0] not in banned.token_ids[:1]
    forced = greedy(engine, logit_bias=((42, 100.0),))
    assert set(forced.token_ids) == {42}


def test_penalties_make_repeats_rarer(engine):
    plain = greedy(engine)
    penalised = greedy(engine, repetition_penalty=2.0, frequency_penalty=1.5)
    assert len(set(penalised.token_ids)) > len(set(plain.token_ids))


def test_a_logit_bias_token_outside_the_vocabulary_fails_that_request_alone(engine):
    finish = greedy(engine, logit_bias=((10**6, 1.0),))
    assert finish.reason == "error" and "vocabulary" in finish.error


def test_structured_output_parses_and_stops_when_complete(engine):
    finish = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=STRUCTURED))
    assert finish.reason == "stop" and 0 <= json.loads(finish.text)["a"] <= 99
