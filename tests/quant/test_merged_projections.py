"""Merged attention projections on the CPU (engine.quant.merged_projections): a merged layer's parts give the bits
of the separate layers at every row count (the GEMV below GEMV_ROWS, the dequantized GEMMs above), for one type
and for mixes (llama.cpp's Q4_K_M: v in Q6_K stays alone); a model merged holds the same bytes and plans the same
dense bytes as one that is not, and its attention projects the same q, k, v."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import torch

from engine.quant.linear import QuantLinearSpec
from engine.quant.merged_projections import merged_linear, mergeable_groups, projection_specs
from engine.quant.quant_modules import GEMV_ROWS, QuantLinear, planned_dense_bytes, weight_bytes
from engine.quant.types import Q4_K, Q6_K, Q8_0
from tests.quant.blocks import random_matrix

IN = 512
ROWS = {"q_proj": 64, "k_proj": 32, "v_proj": 32}
MIXES = [(Q4_K, Q4_K, Q4_K), (Q4_K, Q4_K, Q6_K), (Q8_0, Q8_0, Q8_0), (Q6_K, Q6_K, Q6_K), (Q4_K, Q8_0, Q8_0)]


def projections(types, bias: bool, dtype: torch.dtype = torch.float32) -> list[tuple[str, QuantLinear]]:
    """q_proj, k_proj, v_proj of the given types: random blocks (and biases in dtype)."""
    layers = []
    for seed, (name, qtype) in enumerate(zip(ROWS, types)):
        spec = QuantLinearSpec(qtype, ROWS[name], IN)
        layer = QuantLinear(torch.from_numpy(random_matrix(qtype, ROWS[name], IN, seed=seed).reshape(-1).copy()),
                            spec, bias=bias)
        if bias:
            values = torch.randn(ROWS[name], generator=torch.Generator().manual_seed(seed))
            layer.bias = torch.nn.Parameter(values.to(dtype), requires_grad=False)
        layers.append((name, layer))
    return layers


@pytest.mark.parametrize("types", MIXES, ids=lambda types: "-".join(t.name for t in types))
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_merged_layer_gives_the_separate_layers_bits(types, bias, dtype):
    layers = projections(types, bias, dtype)
    groups = mergeable_groups(layers)
    assert [name for group in groups for name in group] == list(ROWS)
    assert len(groups) == len(set(types))  # every mix here puts each type in one run
    by_name = dict(layers)
    for rows in (1, 3, GEMV_ROWS, GEMV_ROWS + 1, 37):
        x = torch.randn(rows, IN, generator=torch.Generator().manual_seed(rows)).to(dtype)
        separate = [by_name[name](x) for name in ROWS]
        merged = []
        for group in groups:
            members = [by_name[name] for name in group]
            merged += merged_linear(members)(x, split=True) if len(group) > 1 else [members[0](x)]
        for name, got, expected in zip(ROWS, merged, separate):
            assert got.shape == expected.shape and torch.equal(got, expected), (name, rows)


def test_layers_that_differ_in_width_or_bias_stay_apart():
    layers = projections((Q4_K, Q4_K, Q4_K), bias=False)
    layers[2][1].bias = torch.nn.Parameter(torch.zeros(ROWS["v_proj"]), requires_grad=False)
    assert mergeable_groups(layers) == [("q_proj", "k_proj"), ("v_proj",)]
    layers[1] = ("k_proj", torch.nn.Linear(IN, ROWS["k_proj"]))
    assert mergeable_groups(layers) == [("q_proj",), ("k_proj",), ("v_proj",)]


def tiny_models():
    """(separate, merged): the same random Q4_K_M model (k-quant rows: hidden 256) of 4 layers, whose last two
    attn_v tensors are Q6_K (llama.cpp's use_more_bits), built without and with merge_qkv."""
    from engine.bench.synthetic import synthetic_dense
    from engine.model.model_tree import meta_model
    from engine.model.shapes import shape
    from engine.quant.dense_file_types import dense_types

    args = replace(shape("qwen3-topology-tiny", num_layers=4), hidden_size=256, num_experts=4, num_experts_per_tok=2)
    types = dense_types("Q4_K_M", meta_model(args), args)
    return [synthetic_dense(args, torch.float32, torch.device("cpu"), quant_types=types, merge_qkv=merge_qkv)
            for merge_qkv in (False, True)]


def test_a_merged_model_holds_and_plans_the_same_bytes_and_projects_the_same():
    separate, merged = tiny_models()
    assert weight_bytes(merged) == weight_bytes(separate)
    assert planned_dense_bytes(merged, 2) == planned_dense_bytes(separate, 2)
    assert [layer.self_attn.projection_names for layer in merged.layers] == [("qkv_proj",)] * 2 + [
        ("qk_proj", "v_proj")] * 2
    assert all(layer.self_attn.projection_names == ("q_proj", "k_proj", "v_proj") for layer in separate.layers)
    for one, other in zip(separate.layers, merged.layers):
        assert projection_specs(other.self_attn) == projection_specs(one.self_attn)
        for rows in (1, 5, 20):
            x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows))
            for expected, got in zip(one.self_attn.project(x), other.self_attn.project(x)):
                assert torch.equal(got, expected)


# Q4_K alone in the slow step: the Q4_K-Q4_K-Q6_K mix reads merged Q4_K rows (q and k) through the same wide GEMV
@pytest.mark.parametrize("types", [pytest.param(MIXES[0], marks=pytest.mark.slow), *MIXES[1:3]],
                         ids=lambda types: "-".join(t.name for t in types))
def test_the_decode_kernels_read_a_merged_matrix_as_its_parts(types):
    """The wide (Q4_K, Q6_K) and word (Q8_0) GEMVs in Triton's interpreter: a merged layer's rows come out as the
    separate layers' (each row alone, the split fixed by the type and in_features)."""
    from engine.quant.linear import word_gemv_triton, wide_gemv_triton, wide_split
    from engine.system.triton_support import HAS_TRITON

    if not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")
    layers = projections(types, bias=False)
    group = mergeable_groups(layers)[0]
    members = [layer for name, layer in layers if name in group]
    merged = merged_linear(members)
    x = torch.randn(2, IN, generator=torch.Generator().manual_seed(0)).bfloat16()
    rows = torch.zeros(2, dtype=torch.int64)

    def gemv(layer):
        kernel = wide_gemv_triton if wide_split(layer.spec) is not None else word_gemv_triton
        return kernel(x, layer.blocks.view(1, -1), rows, layer.spec)

    for got, layer in zip(gemv(merged).split([m.out_features for m in members], dim=-1), members):
        assert torch.equal(got, gemv(layer))
