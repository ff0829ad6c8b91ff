"""ERNIE 4.5 MoE's config reading and its biased softmax router (the token-exact run against transformers is the
shared runner's, tests/model/test_models.py)."""

import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.model.biased_softmax_args import BiasedSoftmaxArgs
from engine.model.biased_softmax_router import BiasedFp32Gate, BiasedSoftmaxTopK
from engine.model.families import parse_config
from engine.model.published_configs import ERNIE_45_21B_A3B


def test_the_published_config_reads_as_transformers_builds_it():
    args = parse_config(ERNIE_45_21B_A3B)
    assert args.moe_layers == (False,) + (True,) * 27 and args.shared_experts.n_shared_experts == 2
    assert (args.router.kind, args.attention.rope_layout, args.head_dim, args.tie_word_embeddings) == (
        "biased_softmax_topk", "interleaved", 128, True)
    assert args.biased_softmax == BiasedSoftmaxArgs(norm_min=1e-12) and args.num_experts_per_tok == 6


def test_moe_layers_follow_start_end_and_interval():
    config = {**ERNIE_45_21B_A3B, "num_hidden_layers": 8, "moe_layer_start_index": 1, "moe_layer_end_index": 5,
              "moe_layer_interval": 2}
    assert parse_config(config).moe_layers == (False, True, False, True, False, True, False, False)


def test_linear_biases_are_refused():
    with pytest.raises(UnsupportedModelError, match="use_bias"):
        parse_config({**ERNIE_45_21B_A3B, "use_bias": True})


def router(num_experts=8, top_k=2, norm_min=1e-12):
    from dataclasses import replace

    args = replace(parse_config(ERNIE_45_21B_A3B), num_experts=num_experts, num_experts_per_tok=top_k, hidden_size=4,
                   biased_softmax=BiasedSoftmaxArgs(norm_min))
    gate = BiasedFp32Gate(args)
    return gate, BiasedSoftmaxTopK.from_args(args, gate)


def test_the_bias_moves_the_choice_and_not_the_weights():
    gate, route = router()
    logits = torch.randn(5, 8)
    with torch.no_grad():
        gate.e_score_correction_bias.zero_()
        gate.e_score_correction_bias[0, 7] = 10.0  # expert 7 always chosen, weighted by its own probability
    ids, weights = route.select(logits)
    probs = logits.softmax(-1)
    assert (ids == 7).any(-1).all()
    assert torch.allclose(weights, probs.gather(1, ids) / probs.gather(1, ids).sum(-1, keepdim=True))
    assert torch.equal(route.select(logits, ids)[1], weights)


def test_the_renormalisation_is_floored_at_norm_min():
    gate, route = router(norm_min=10.0)
    with torch.no_grad():
        gate.e_score_correction_bias.zero_()
    logits = torch.randn(3, 8)
    ids, weights = route.select(logits)
    assert torch.allclose(weights, logits.softmax(-1).gather(1, ids) / 10.0)
