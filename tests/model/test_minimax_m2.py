"""MiniMax-M2's config reading and weight names (the token-exact run against transformers is the shared runner's,
tests/model/test_models.py; its GGUF files: tests/gguf/test_minimax_m2_gguf.py)."""

import pytest

from engine.errors import ModelFormatError
from engine.model.families import family, parse_config

PUBLISHED = {  # MiniMaxAI/MiniMax-M2's geometry as its config.json spells it (rotary_dim, no rope_parameters)
    "model_type": "minimax_m2", "vocab_size": 200064, "hidden_size": 3072, "num_hidden_layers": 62,
    "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "rotary_dim": 64, "rope_theta": 5000000,
    "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8, "rms_norm_eps": 1e-06,
    "use_qk_norm": True, "scoring_func": "sigmoid", "use_routing_bias": True, "max_position_embeddings": 196608,
}


def test_the_published_config_reads_as_transformers_builds_it():
    args = parse_config(PUBLISHED)
    assert args.rotary_dim == 64 and args.attention.qk_norm == "full" and args.num_moe_layers == 62
    assert (args.router.kind, args.router.topk_method, args.router.n_group, args.router.norm_topk_prob, args.router.routed_scaling_factor) == (
        "grouped", "noaux_tc", 1, True, 1.0)
    assert (args.moe_intermediate_size, args.num_experts, args.num_experts_per_tok) == (1536, 256, 8)
    assert args.kv_bytes_per_token(2) == 2 * 62 * 8 * 128 * 2


def test_rope_parameters_partial_rotary_factor_is_read_too():
    config = {**PUBLISHED, "rope_parameters": {"rope_theta": 5e6, "partial_rotary_factor": 0.25}}
    assert parse_config(config).rotary_dim == 32


def test_an_odd_rotary_part_is_refused():
    with pytest.raises(ModelFormatError, match="rotary part"):
        parse_config({**PUBLISHED, "rotary_dim": 63})


def test_the_correction_bias_sits_in_the_moe_block():
    names = family("minimax_m2").weight_names
    assert names.checkpoint_name("layers.3.mlp.gate.e_score_correction_bias") == (
        "model.layers.3.block_sparse_moe.e_score_correction_bias")
    assert names.checkpoint_name("layers.3.mlp.gate.weight") == "model.layers.3.block_sparse_moe.gate.weight"
    assert names.expert_weight(3, 5, names.up) == "model.layers.3.block_sparse_moe.experts.5.w3.weight"


def test_the_tiny_reference_turns_only_the_rotary_part_where_transformers_ignores_rotary_dim(monkeypatch):
    """transformers 5.17 (the GPU machines') reads no rotary_dim and turns whole heads: the tiny checkpoint's
    reference must turn rotary_dim channels of each head there too (its config's partial_rotary_factor), or the
    greedy runs against transformers compare Wisp with another model. Here transformers without its rotary_dim
    conversion (MiniMaxM2Config.convert_rope_params_to_dict, the base class's alone) stands for that version."""
    from transformers import MiniMaxM2Config

    from tests.tiny_models import hf_model

    base = next(c for c in MiniMaxM2Config.__mro__[1:] if hasattr(c, "convert_rope_params_to_dict"))
    monkeypatch.setattr(MiniMaxM2Config, "convert_rope_params_to_dict", base.convert_rope_params_to_dict)
    model = hf_model("minimax_m2")
    assert model.config.rotary_dim == 8 and model.config.head_dim == 16
    assert model.model.rotary_emb.inv_freq.numel() * 2 == model.config.rotary_dim
