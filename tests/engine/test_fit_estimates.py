"""Fit estimates from a config.json alone (the picker, `wisp configure`, the memory panel) for the published
shapes of the MoE families with shared experts or first dense layers: shared experts are dense weights (they run
for every token), never expert slots. Expected sizes are counted here from the published numbers."""

import json

import pytest

from engine.alloc.memory_plan import GiB
from engine.catalog import estimate_plan, fit_summary
from engine.model.registry import parse_config
from engine.model.sizes import model_sizes

QWEN15_MOE_A27B = {  # Qwen/Qwen1.5-MoE-A2.7B config.json
    "model_type": "qwen2_moe", "vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 60, "num_experts_per_tok": 4,
    "moe_intermediate_size": 1408, "intermediate_size": 5632, "shared_expert_intermediate_size": 5632,
    "max_position_embeddings": 8192, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    "decoder_sparse_step": 1, "norm_topk_prob": False, "torch_dtype": "bfloat16",
}


def config_folder(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


def test_qwen2_moe_shared_expert_and_its_gate_are_dense_weights():
    D, layers, heads_dim = 2048, 24, 16 * 128
    attention = 4 * D * heads_dim + 3 * heads_dim  # q, k, v, o (MHA) and the q/k/v biases
    per_layer = attention + 2 * D + 60 * D + (3 * D * 5632 + D)  # norms, router, shared expert and its gate
    dense = 2 * 151936 * D + D + layers * per_layer
    sizes = model_sizes(parse_config(QWEN15_MOE_A27B), 2)
    assert sizes.dense_bytes == 2 * dense
    assert sizes.shared_expert_bytes == 2 * layers * 3 * D * 5632
    assert sizes.expert_bytes == 2 * 3 * D * 1408 and sizes.num_moe_layers == layers


def test_a_plan_carries_its_shared_expert_bytes_inside_the_dense_weights(tmp_path):
    folder = config_folder(tmp_path, QWEN15_MOE_A27B)
    plan = estimate_plan(folder, 12 * GiB)
    sizes = model_sizes(parse_config(QWEN15_MOE_A27B), 2)
    assert plan.dense_bytes == sizes.dense_bytes and plan.shared_expert_bytes == sizes.shared_expert_bytes
    assert plan.total_bytes <= 12 * GiB
    assert fit_summary(folder, 40 * GiB) == "fits"
    assert fit_summary(folder, 12 * GiB) == f"pages experts ({plan.min_layer_slots} slots per layer)"
