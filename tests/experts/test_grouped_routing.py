"""DeepSeek-style routing against transformers' own routers (GLM-4.5, DeepSeek-V3, DeepSeek-V2) on random logits:
the same expert ids in the same order and bitwise equal weights."""

from __future__ import annotations

import pytest
import torch

from engine.experts.routing.grouped_routing import GroupedRouting
from engine.model.families.deepseek_config import routing_problem

TOKENS = 41


def hf_router(router_class, config, num_experts: int, bias: torch.Tensor | None):
    """transformers' router with an identity weight (hidden size = experts), so its input is the logits exactly."""
    router = router_class(config)
    with torch.no_grad():
        router.weight.copy_(torch.eye(num_experts))
        if bias is not None:
            router.e_score_correction_bias.copy_(bias)
    return router


def random_logits(num_experts: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(TOKENS, num_experts, generator=generator) * 2


NOAUX_CASES = [  # (model, experts, top_k, n_group, topk_group, norm_topk_prob, routed_scaling_factor)
    ("glm4_moe", 16, 4, 1, 1, True, 1.0),  # GLM-4.5-Air's grouping at toy width
    ("glm4_moe", 16, 2, 4, 2, False, 2.5),
    ("deepseek_v3", 32, 8, 8, 4, True, 2.5),  # DeepSeek-V3's grouping (256 experts, 8 groups, 4 kept)
    ("deepseek_v3", 24, 3, 3, 1, True, 1.5),
    ("deepseek_v3", 256, 8, 8, 4, True, 2.5),
]


@pytest.mark.parametrize("model,num_experts,top_k,n_group,topk_group,norm,scale", NOAUX_CASES)
def test_noaux_tc_matches_transformers(model, num_experts, top_k, n_group, topk_group, norm, scale):
    from transformers import DeepseekV3Config, Glm4MoeConfig
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter

    config_class, router_class = {"glm4_moe": (Glm4MoeConfig, Glm4MoeTopkRouter),
                                  "deepseek_v3": (DeepseekV3Config, DeepseekV3TopkRouter)}[model]
    config = config_class(hidden_size=num_experts, n_routed_experts=num_experts, num_experts_per_tok=top_k,
                          n_group=n_group, topk_group=topk_group, norm_topk_prob=norm, routed_scaling_factor=scale)
    routing = GroupedRouting(num_experts, top_k, "noaux_tc", n_group, topk_group, norm, scale)
    assert routing_problem(num_experts, top_k, "noaux_tc", n_group, topk_group) is None
    for seed in range(3):
        logits = random_logits(num_experts, seed)
        bias = torch.randn(num_experts, generator=torch.Generator().manual_seed(100 + seed)) * 0.2
        _, ref_weights, ref_ids = hf_router(router_class, config, num_experts, bias)(logits)
        ids, weights = routing.route(logits, bias)
        assert torch.equal(ids, ref_ids) and torch.equal(weights, ref_weights)
        assert weights.dtype == torch.float32


def test_the_correction_bias_steers_the_choice_but_not_the_weights():
    routing = GroupedRouting(8, 2, "noaux_tc", norm_topk_prob=False)
    logits = random_logits(8, 0)
    bias = torch.zeros(8)
    bias[7] = 10.0  # expert 7 wins every token's choice...
    ids, weights = routing.route(logits, bias)
    assert (ids == 7).any(dim=-1).all()
    assert torch.equal(weights, logits.sigmoid().gather(1, ids))  # ...at its unbiased score


def test_groups_outside_topk_group_are_never_chosen():
    routing = GroupedRouting(16, 3, "noaux_tc", n_group=4, topk_group=1)
    ids, _ = routing.route(random_logits(16, 1), torch.zeros(16))
    groups = ids // 4
    assert (groups == groups[:, :1]).all()


V2_CASES = [  # (topk_method, experts, top_k, n_group, topk_group, routed_scaling_factor)
    ("greedy", 16, 6, None, None, 1.0),  # DeepSeek-V2-Lite: 64 experts, top-6, greedy, factor 1
    ("greedy", 24, 4, None, None, 2.0),
    ("group_limited_greedy", 32, 6, 8, 3, 16.0),  # DeepSeek-V2: 160 experts, 8 groups, 3 kept, factor 16
    ("group_limited_greedy", 16, 2, 4, 1, 1.0),
]


@pytest.mark.parametrize("method,num_experts,top_k,n_group,topk_group,scale", V2_CASES)
def test_deepseek_v2_softmax_routing_matches_transformers(method, num_experts, top_k, n_group, topk_group, scale):
    from transformers import DeepseekV2Config
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter

    config = DeepseekV2Config(hidden_size=num_experts, num_attention_heads=2, n_routed_experts=num_experts, num_experts_per_tok=top_k,
                              topk_method=method, n_group=n_group, topk_group=topk_group, routed_scaling_factor=scale)
    routing = GroupedRouting(num_experts, top_k, method, n_group or 1, topk_group or 1, False, scale)
    for seed in range(3):
        logits = random_logits(num_experts, seed)
        _, ref_weights, ref_ids = hf_router(DeepseekV2TopkRouter, config, num_experts, None)(logits)
        ids, weights = routing.route(logits)
        assert torch.equal(ids, ref_ids) and torch.equal(weights, ref_weights)


ALL_METHODS = [GroupedRouting(32, 4, "noaux_tc", 4, 2, True, 2.5), GroupedRouting(32, 4, "noaux_tc", 1, 1, False, 1.0),
               GroupedRouting(32, 4, "greedy", routed_scaling_factor=1.5),
               GroupedRouting(32, 4, "group_limited_greedy", 4, 2, routed_scaling_factor=16.0)]


@pytest.mark.parametrize("routing", ALL_METHODS, ids=lambda r: f"{r.topk_method}-{r.n_group}")
def test_weights_for_the_routers_own_ids_are_its_weights_bitwise(routing):
    """Trace-driven benchmarks give the ids; their weights must be the ones the router would have given them."""
    logits, bias = random_logits(32, 5), torch.randn(32) * 0.1
    ids, weights = routing.route(logits, bias)
    assert torch.equal(routing.weights_for(logits, ids), weights)


@pytest.mark.parametrize("routing", ALL_METHODS, ids=lambda r: f"{r.topk_method}-{r.n_group}")
def test_weights_for_other_ids_are_their_scaled_scores(routing):
    logits = random_logits(32, 6)
    ids = torch.randint(0, 32, (TOKENS, 4), generator=torch.Generator().manual_seed(7))
    scores = logits.sigmoid() if routing.topk_method == "noaux_tc" else logits.softmax(-1)
    expected = scores.gather(1, ids)
    if routing.norm_topk_prob:
        expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(routing.weights_for(logits, ids), expected * routing.routed_scaling_factor)


@pytest.mark.parametrize("settings,fragment", [
    ((16, 2, "noaux_tc", 3, 1), "n_group=3 must divide"),
    ((16, 2, "noaux_tc", 4, 5), "topk_group=5 must be between 1 and n_group=4"),
    ((16, 2, "noaux_tc", 16, 1), "noaux_tc scores a group by its best two"),
    ((16, 6, "group_limited_greedy", 4, 1), "num_experts_per_tok=6 is more than the 4 experts"),
])
def test_impossible_router_settings_are_named(settings, fragment):
    assert fragment in routing_problem(*settings)
