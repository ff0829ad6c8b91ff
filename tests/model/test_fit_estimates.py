"""Fit estimates from a config.json alone (the picker, `wisp configure`, the memory panel) for published models
with shared experts, first dense layers or resident biases: all of those are dense weights (they run for every
token), never expert slots. Expected sizes are counted here from the published numbers."""

import json

import pytest

from engine.alloc.memory_plan import GiB
from engine.loading.catalog import engine_plan, fit_summary
from engine.config import EngineOptions
from engine.model.published_configs import GLM_45_AIR, GPT_OSS_20B
from engine.model.families import parse_config
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


def bf16_options(folder: str, budget_bytes: int | None, mode: str = "paged") -> EngineOptions:
    """As a GPU would load the published model: bf16, one sequence."""
    return EngineOptions(model=folder, budget_bytes=budget_bytes, experts=mode, device="cpu", dtype="bfloat16",
                         max_num_seqs=1)


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
    plan = engine_plan(bf16_options(folder, 12 * GiB))
    sizes = model_sizes(parse_config(QWEN15_MOE_A27B), 2)
    assert plan.dense_bytes == sizes.dense_bytes and plan.shared_expert_bytes == sizes.shared_expert_bytes
    assert plan.total_bytes <= 12 * GiB
    assert fit_summary(bf16_options(folder, 40 * GiB)) == "fits"
    assert fit_summary(bf16_options(folder, 12 * GiB)) == f"pages experts ({plan.min_layer_slots} slots per layer)"


def test_glm_45_air_shared_expert_and_first_dense_layer_are_dense_weights():
    """Layer 0 is a dense MLP, layers 1-45 route 8 of 128 experts and run one shared expert; routers (weight and
    correction bias) stay fp32."""
    D, q, kv = 4096, 96 * 128, 8 * 128
    attention = D * q + 2 * D * kv + q * D + q + 2 * kv + 2 * D  # q/k/v biases, two norms
    bf16_params = 2 * 151552 * D + D + 46 * attention + 3 * D * 10944 + 45 * 3 * D * 1408
    fp32_params = 45 * (128 * D + 128)
    sizes = model_sizes(parse_config(GLM_45_AIR), 2)
    assert sizes.dense_bytes == 2 * bf16_params + 4 * fp32_params
    assert sizes.shared_expert_bytes == 2 * 45 * 3 * D * 1408
    assert (sizes.expert_bytes, sizes.num_moe_layers, sizes.num_experts) == (2 * 3 * D * 1408, 45, 128)
    assert sizes.kv_bytes_per_token == 2 * 46 * kv * 2


def test_gpt_oss_20b_biases_and_sinks_are_dense_weights():
    """The bf16 form: every layer routes 4 of 32; attention biases (o_proj's too) and sinks, the router's bias and
    the experts' biases are resident with the dense weights, a slot holds only the three projections."""
    D, q, kv, I, E = 2880, 64 * 64, 8 * 64, 2880, 32
    attention = D * q + 2 * D * kv + q * D + q + 2 * kv + D + 64 + 2 * D  # biases, sinks, two norms
    moe = E * D + E + E * (2 * I + D)  # router and its bias, expert biases
    sizes = model_sizes(parse_config(GPT_OSS_20B), 2)
    assert sizes.dense_bytes == 2 * (2 * 201088 * D + D + 24 * (attention + moe))
    assert sizes.shared_expert_bytes == 0
    assert (sizes.expert_bytes, sizes.num_moe_layers, sizes.num_experts) == (2 * 3 * D * I, 24, 32)
    assert sizes.kv_bytes_per_token == 2 * 24 * kv * 2


@pytest.mark.parametrize("config, pages_gib, fits_gib, too_small_gib", [
    (GLM_45_AIR, 48, 256, 24),  # 185.6 GiB of experts; the minimum is ~27 GiB
    (GPT_OSS_20B, 12, 48, 8),  # 35.6 GiB of experts in bf16; the minimum is 9.3 GiB
])
def test_fit_of_the_published_shapes(tmp_path, config, pages_gib, fits_gib, too_small_gib):
    folder = config_folder(tmp_path, config)
    assert fit_summary(bf16_options(folder, fits_gib * GiB)) == "fits"
    plan = engine_plan(bf16_options(folder, pages_gib * GiB))
    assert plan.mode == "paged" and config["num_experts_per_tok"] <= plan.min_layer_slots < 32
    assert fit_summary(bf16_options(folder, pages_gib * GiB)) == f"pages experts ({plan.min_layer_slots} slots per layer)"
    assert plan.total_bytes <= pages_gib * GiB
    assert fit_summary(bf16_options(folder, too_small_gib * GiB)).startswith("too small: ")


def test_a_quantized_release_is_refused_by_name_not_read_as_weights(tmp_path):
    """GLM-4.5-Air-FP8 holds FP8 weights with block scales: read as plain tensors they would be wrong."""
    from engine.errors import UnsupportedModelError
    from engine.model.config_file import read_args

    config_folder(tmp_path, {**GLM_45_AIR, "quantization_config": {"quant_method": "fp8",
                                                                   "weight_block_size": [128, 128]}})
    with pytest.raises(UnsupportedModelError, match="'glm4_moe' checkpoints quantized with 'fp8' are not supported"):
        read_args(tmp_path)
    assert parse_config({**GPT_OSS_20B, "quantization_config": {"quant_method": "mxfp4"}}).model_type == "gpt_oss"
