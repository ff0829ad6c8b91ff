"""GLM-4.7-Flash's config reading and its benchmark shape (the token-exact run against transformers is the shared
runner's, tests/model/test_models.py)."""

import pytest

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.families import parse_config
from engine.model.published_configs import GLM_47_FLASH
from engine.model.shapes import shape


def test_the_published_config_is_the_benchmark_shape():
    args = shape("glm-4.7-flash")
    assert args.moe_layers == (False,) + (True,) * 46 and args.mla.kv_lora_rank == 512 and args.mla.q_lora_rank == 768
    assert (args.router.kind, args.router.topk_method, args.router.routed_scaling_factor, args.shared_experts.n_shared_experts) == (
        "grouped", "noaux_tc", 1.8, 1)
    assert args.attention.rope_layout == "interleaved" and args.head_dim == 64 and args.mla.v_head_dim == 256
    assert args.kv_bytes_per_token(2) == 47 * (512 + 64) * 2


def test_mlp_layer_types_decide_the_dense_layers():
    config = {**GLM_47_FLASH, "num_hidden_layers": 4, "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]}
    assert parse_config(config).moe_layers == (False, False, True, True)
    with pytest.raises(ModelFormatError, match="mlp_layer_types"):
        parse_config({**config, "mlp_layer_types": ["dense", "sparse"]})


def test_partial_rope_is_refused():
    with pytest.raises(UnsupportedModelError, match="partial_rotary_factor"):
        parse_config({**GLM_47_FLASH, "partial_rotary_factor": 0.5})
