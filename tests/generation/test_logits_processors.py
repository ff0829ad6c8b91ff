"""The sampler's logits processors: penalties as transformers and OpenAI define them, logit_bias, min_p, the
top alternatives, and a row's token independent of the rows beside it."""

from __future__ import annotations

import pytest
import torch

from engine.errors import RequestError
from engine.generation.logits_processors import (RowContext, apply_logit_bias, apply_min_p, apply_presence_frequency,
                                                 apply_repetition_penalty, top_alternatives)
from engine.generation.sampler import sample
from engine.sampling import SamplingParams

V = 64


def logits(seed: int = 0, rows: int = 1) -> torch.Tensor:
    return torch.randn(rows, V, generator=torch.Generator().manual_seed(seed)) * 3


def test_repetition_penalty_equals_transformers():
    transformers = pytest.importorskip("transformers")
    row, seen = logits()[0], [3, 7, 7, 40]
    expected = transformers.RepetitionPenaltyLogitsProcessor(1.7)(torch.tensor([seen]), row[None].clone())[0]
    assert torch.equal(apply_repetition_penalty(row, seen, 1.7), expected)


def test_presence_and_frequency_penalties_are_openais():
    row = torch.zeros(V)
    out = apply_presence_frequency(row, [5, 5, 5, 9], presence=0.5, frequency=0.25)
    assert out[5] == -(0.5 + 3 * 0.25) and out[9] == -(0.5 + 0.25) and out[0] == 0 and row[5] == 0


def test_logit_bias_adds_to_the_named_tokens():
    row = logits()[0]
    out = apply_logit_bias(row, ((2, 100.0), (3, -100.0)))
    assert out[2] == row[2] + 100 and out[3] == row[3] - 100 and torch.equal(out[4:], row[4:])


def test_min_p_keeps_tokens_at_least_that_fraction_of_the_best():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    kept = torch.isfinite(apply_min_p(probs.log(), 0.25))
    assert kept.tolist() == [True, True, True, False]


def test_greedy_follows_the_processed_logits():
    row = logits(1)
    best = int(row.argmax())
    params = SamplingParams(logit_bias=((best, -100.0),))
    tokens, logprobs = sample(row, [params], [None], [RowContext([1, 2], 2)])
    assert tokens[0] != best
    assert logprobs[0] == pytest.approx(float(torch.log_softmax(row[0], -1)[tokens[0]]))  # the model's own


def test_a_seeded_row_gives_the_same_token_whatever_shares_the_batch():
    params = SamplingParams(temperature=0.9, top_k=20, min_p=0.02, repetition_penalty=1.3, presence_penalty=0.4,
                            frequency_penalty=0.3, logit_bias=((1, 2.0),), seed=3)
    batch = logits(2, rows=5)
    context = RowContext([4, 4, 9, 1, 1, 1], 3)
    alone = sample(batch[:1].clone(), [params], [torch.Generator().manual_seed(3)], [context])[0]
    others = [SamplingParams(temperature=1.0, seed=i) for i in range(4)]
    together = sample(batch, [params, *others], [torch.Generator().manual_seed(s) for s in (3, 0, 1, 2, 3)],
                      [context, None, RowContext([2], 1), None, None])[0]
    assert together[0] == alone[0]


def test_top_alternatives_are_the_most_likely_tokens_per_row():
    batch = logits(4, rows=2)
    tops = top_alternatives(batch, [SamplingParams(top_logprobs=3), SamplingParams()])
    expected = torch.log_softmax(batch[0], -1).topk(3)
    assert [t for t, _ in tops[0]] == expected.indices.tolist()
    assert [lp for _, lp in tops[0]] == expected.values.tolist() and tops[1] == ()


@pytest.mark.parametrize("fields, field", [
    ({"presence_penalty": 2.5}, "presence_penalty"), ({"frequency_penalty": -3}, "frequency_penalty"),
    ({"repetition_penalty": 0}, "repetition_penalty"), ({"min_p": 1.5}, "min_p"),
    ({"logit_bias": ((1, 101.0),)}, "logit_bias"), ({"logit_bias": ((1, 1.0), (1, 2.0))}, "logit_bias"),
    ({"top_logprobs": 21}, "top_logprobs"), ({"json_schema": "[1"}, "json_schema"),
    ({"json_schema": "[1, 2]"}, "json_schema"),
])
def test_sampling_values_out_of_range_are_refused_naming_the_field(fields, field):
    with pytest.raises(RequestError) as excinfo:
        SamplingParams(**fields)
    assert excinfo.value.field == field

