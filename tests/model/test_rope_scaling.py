"""YaRN RoPE (engine.model.rope_scaling): the same inverse frequencies and attention factor, bit for bit, as
transformers computes for the config, and refused by architectures that do not implement it."""

from __future__ import annotations

import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.model.args import rope_scaling, rope_theta
from engine.model.layers import RotaryEmbedding
from engine.model.rope_scaling import inverse_frequencies

GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def transformers_yarn(config_dict: dict):
    from transformers import GptOssConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = GptOssConfig(**config_dict)
    return ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")


@pytest.mark.parametrize("yarn", [
    GPT_OSS_YARN,  # gpt-oss-20b as published
    {**GPT_OSS_YARN, "truncate": True, "factor": 8.0},  # rounded correction range
    {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 0.707,
     "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1},  # DeepSeek-V3's form
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256, "attention_factor": 0.9},
])
def test_yarn_matches_transformers_bitwise(yarn):
    config = dict(model_type="gpt_oss", head_dim=64, hidden_size=256, num_attention_heads=4, rope_theta=150000.0,
                  max_position_embeddings=131072, rope_scaling=dict(yarn))
    ours, factor = inverse_frequencies(rope_scaling(config, ("yarn",)), 64, rope_theta(config, 1e4, ("yarn",)))
    reference, reference_factor = transformers_yarn({k: v for k, v in config.items() if k != "model_type"})
    assert torch.equal(ours, reference)
    assert factor == reference_factor


def test_rotary_embedding_scales_cos_and_sin_by_the_attention_factor():
    config = dict(model_type="gpt_oss", max_position_embeddings=131072, rope_scaling=dict(GPT_OSS_YARN))
    rotary = RotaryEmbedding(64, 150000.0, rope_scaling(config, ("yarn",)))
    cos, sin = rotary(torch.arange(5), torch.float32)
    assert rotary.attention_factor > 1
    assert torch.allclose(cos ** 2 + sin ** 2, torch.full_like(cos, rotary.attention_factor ** 2))


def test_an_architecture_without_yarn_refuses_it():
    config = dict(model_type="qwen3_moe", rope_scaling=dict(GPT_OSS_YARN))
    with pytest.raises(UnsupportedModelError, match="'yarn' is not supported for 'qwen3_moe'"):
        rope_theta(config, 1e4)
    assert rope_scaling({"rope_theta": 1e6}) is None
