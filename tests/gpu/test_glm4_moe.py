"""glm4_moe and DeepSeek-style routing on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_glm4_moe.py`.
tests/gpu/test_cuda.py runs the tiny glm4_moe through the shared runner too (bf16 greedy against transformers,
expert modes bitwise). They fail (not skip) without a GPU."""

from __future__ import annotations

import gc

import pytest
import torch

from engine.alloc.memory_plan import GiB
from engine.api import EngineOptions
from engine.experts.routing.grouped_routing import GroupedRouting
from engine.model.families import parse_config
from tests.gpu.test_cuda import bf16_model_dir, cuda_outputs  # noqa: F401 (bf16_model_dir is a fixture)

pytestmark = pytest.mark.gpu

# GLM-4.5-Air's published config.json (the keys Wisp reads), cut to its first layers for the device's sake.
GLM_4_5_AIR = dict(model_type="glm4_moe", vocab_size=151552, hidden_size=4096, num_hidden_layers=46,
                   num_attention_heads=96, num_key_value_heads=8, head_dim=128, n_routed_experts=128,
                   n_shared_experts=1, num_experts_per_tok=8, moe_intermediate_size=1408, intermediate_size=10944,
                   first_k_dense_replace=1, n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=True,
                   attention_bias=True, partial_rotary_factor=0.5, rope_theta=1000000, rms_norm_eps=1e-5,
                   use_qk_norm=False, max_position_embeddings=131072, tie_word_embeddings=False,
                   torch_dtype="bfloat16")


def hf_router(name: str, num_experts: int, top_k: int, **settings):
    """transformers' router of `name` with an identity weight (hidden size = experts): its input is the logits."""
    from transformers import DeepseekV2Config, DeepseekV3Config, Glm4MoeConfig
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter

    config_class, router_class = {"glm4_moe": (Glm4MoeConfig, Glm4MoeTopkRouter),
                                  "deepseek_v3": (DeepseekV3Config, DeepseekV3TopkRouter),
                                  "deepseek_v2": (DeepseekV2Config, DeepseekV2TopkRouter)}[name]
    config = config_class(hidden_size=num_experts, num_attention_heads=8, n_routed_experts=num_experts,
                          num_experts_per_tok=top_k, **settings)
    router = router_class(config).cuda()
    with torch.no_grad():
        router.weight.copy_(torch.eye(num_experts))
    return router


ROUTERS = [  # (transformers router, experts, top_k, settings): the published models' routing
    ("glm4_moe", 128, 8, dict(n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0)),  # GLM-4.5-Air
    ("glm4_moe", 160, 8, dict(n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5)),  # GLM-4.5
    ("deepseek_v3", 256, 8, dict(n_group=8, topk_group=4, norm_topk_prob=True, routed_scaling_factor=2.5)),  # V3
    ("deepseek_v3", 64, 6, dict(n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.446)),  # Moonlight
    ("deepseek_v2", 160, 6, dict(topk_method="group_limited_greedy", n_group=8, topk_group=3,
                                 routed_scaling_factor=16.0)),  # DeepSeek-V2
    ("deepseek_v2", 64, 6, dict(topk_method="greedy", routed_scaling_factor=1.0)),  # DeepSeek-V2-Lite
]


@pytest.mark.parametrize("name,num_experts,top_k,settings", ROUTERS,
                         ids=["glm-4.5-air", "glm-4.5", "deepseek-v3", "moonlight", "deepseek-v2", "deepseek-v2-lite"])
def test_routing_matches_transformers_routers_on_cuda(name, num_experts, top_k, settings):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    router = hf_router(name, num_experts, top_k, **settings)
    method = settings.get("topk_method", "noaux_tc")
    routing = GroupedRouting(num_experts, top_k, method, settings.get("n_group") or 1, settings.get("topk_group") or 1,
                             settings.get("norm_topk_prob", False) and method == "noaux_tc",
                             settings["routed_scaling_factor"])
    generator = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(2048, num_experts, generator=generator, device="cuda") * 2
    bias = None
    if method == "noaux_tc":
        bias = torch.randn(num_experts, generator=generator, device="cuda") * 0.2
        with torch.no_grad():
            router.e_score_correction_bias.copy_(bias)
    with torch.inference_mode():
        _, reference_weights, reference_ids = router(logits)
        ids, weights = routing.route(logits, bias)
    assert torch.equal(ids, reference_ids) and torch.equal(weights, reference_weights)
    assert torch.equal(routing.weights_for(logits, ids), weights)


def test_glm4_moe_graphs_equal_the_eager_static_path(bf16_model_dir):
    """Partial RoPE and the fp32 grouped router inside whole-step CUDA graphs: the same bits as eager decode."""
    folder = bf16_model_dir("glm4_moe")
    static = cuda_outputs(folder, decode="static")
    assert cuda_outputs(folder, decode="graphs") == static
    assert cuda_outputs(folder, decode="graphs", experts="paged", expert_slots=3) == static


def test_paged_glm_4_5_air_shape_stays_within_budget_and_plans_its_dense_bytes():
    """Four GLM-4.5-Air layers (the dense first one, three with 128 experts and a shared expert) with synthetic
    weights: the plan's dense bytes are the device's (shared experts and fp32 routers included), and a paged
    run's peak stays within the budget."""
    from dataclasses import replace

    from engine.bench.suite import decode_once, plan_for
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.runtime.builder import assemble_engine

    device = torch.device("cuda")
    args = parse_config(GLM_4_5_AIR)
    args = replace(args, num_hidden_layers=4, moe_layers=args.moe_layers[:4])
    weights = synthetic_weights(args, device, experts_on_host=True)
    gc.collect()  # engines of earlier tests may still hold device memory until the cycle collector runs
    torch.cuda.empty_cache()
    dense = sum(t.numel() * t.element_size() for t in weights.model.state_dict().values() if t.is_cuda)
    others = torch.cuda.memory_allocated(device) - dense
    budget = 8 * GiB
    torch.cuda.reset_peak_memory_stats(device)
    plan = plan_for(weights, "paged", budget, None, batch=1, max_len=4096)
    assert plan.dense_bytes == dense
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda", experts="paged", max_num_seqs=1),
                             plan, device, 4096)
    decode_once(engine, prompt=1024, tokens=16, batch=1, seed=0)
    peak = torch.cuda.max_memory_allocated(device) - others
    print(f"GLM-4.5-Air x4 layers: budget {budget / 1e6:.0f} MB, plan dense {plan.dense_bytes / 1e6:.0f} MB, "
          f"{plan.min_layer_slots} slots per layer, peak {peak / 1e6:.0f} MB")
    assert 8 <= plan.min_layer_slots < 128
    assert peak <= budget
