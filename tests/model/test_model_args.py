"""ModelArgs: the common sizes, and each layer's variants as a typed, frozen sub-spec."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from engine.model.args import ModelArgs
from engine.model.router_args import RouterArgs
from engine.model.shapes import SHAPES

# The numbers every architecture has (and what each layer is); everything else is a sub-spec (docs/adding-an-architecture.md).
COMMON = {"model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "head_dim", "rms_norm_eps", "rope_theta", "max_position_embeddings", "tie_word_embeddings", "num_experts",
          "num_experts_per_tok", "moe_intermediate_size", "intermediate_size", "moe_layers", "torch_dtype",
          "rope_scaling", "norm_weight_fp32", "layer_types", "extra"}


def spec_class(hint):
    """The dataclass a field holds (XArgs or XArgs | None), or None for a plain value."""
    options = [hint] if dataclasses.is_dataclass(hint) else list(typing.get_args(hint))
    specs = [option for option in options if dataclasses.is_dataclass(option)]
    return specs[0] if specs else None


def test_a_layer_option_is_a_frozen_sub_spec_not_a_loose_field():
    hints = typing.get_type_hints(ModelArgs)
    for field in dataclasses.fields(ModelArgs):
        if field.name in COMMON:
            continue
        spec = spec_class(hints[field.name])
        assert spec is not None, f"ModelArgs.{field.name}: a layer's option belongs in a sub-spec module"
        assert spec.__dataclass_params__.frozen, f"{spec.__name__} must be frozen"


def test_the_grouped_router_and_only_it_reads_a_topk_method():
    assert RouterArgs(norm_topk_prob=True, kind="grouped", topk_method="noaux_tc").n_group == 1
    with pytest.raises(ValueError, match="grouped"):
        RouterArgs(norm_topk_prob=True, kind="grouped")
    with pytest.raises(ValueError, match="topk_method 'greedy'"):
        RouterArgs(norm_topk_prob=True, topk_method="greedy")


def test_the_window_and_the_kv_bytes_read_the_attention_sub_spec():
    gpt_oss = SHAPES["gpt-oss-20b"]
    assert gpt_oss.layer_types[:2] == ("sliding_attention", "full_attention")
    assert (gpt_oss.window(0), gpt_oss.window(1)) == (gpt_oss.attention.sliding_window, None) == (128, None)
    hybrid = SHAPES["qwen3-next-80b-a3b"]
    kv_layers = hybrid.layer_types.count("full_attention")
    assert hybrid.num_kv_layers == kv_layers < hybrid.num_hidden_layers
    assert hybrid.kv_bytes_per_token(2) == 2 * kv_layers * hybrid.num_key_value_heads * hybrid.head_dim * 2
    full = dataclasses.replace(hybrid, layer_types=())
    assert full.num_kv_layers == full.num_hidden_layers
