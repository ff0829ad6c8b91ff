"""Quantized experts under every provider: a tiny MoE layer set whose layers mix types (as llama.cpp's Q4_K_M
does) gives bitwise identical outputs resident, statically offloaded and paged at several slot counts, for
decode-sized (gathered GEMV) and prefill-sized (dequantize, then the dense expert math) steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.errors import ModelFormatError
from engine.experts.pager import pager_kernels
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.experts.providers.static import StaticOffloadExperts
from engine.gguf.tensors import ExpertLayer, ExpertTensor
from engine.quant.gguf_store import quant_store_from_gguf
from engine.quant.file_types import expert_types
from engine.quant.layout import QuantLayout
from engine.quant.reference import dequantize_reference
from engine.quant.synthetic import WEIGHT_SCALE, synthetic_quant_experts
from engine.quant.types import quant_type
from tests.quant.blocks import random_matrix

D, I, E, TOP_K = 256, 256, 8, 2
TYPES = {0: ("Q4_K", "Q4_K", "Q6_K"), 1: ("Q4_K", "Q4_K", "Q4_K"), 3: ("Q8_0", "Q8_0", "Q8_0")}
CPU = torch.device("cpu")


def fake_layer(layer: int, types, stride_pad: int = 0) -> ExpertLayer:
    """Random experts as engine.gguf reads them: raw [E, bytes] rows, `stride_pad` bytes apart beyond their size
    (older files store one tensor per expert)."""
    tensors = []
    for j, (name, kind, shape) in enumerate(zip(("gate", "up", "down"), types, ((I, D), (I, D), (D, I)))):
        qtype = quant_type(kind)
        rows = [random_matrix(qtype, *shape, seed=100 * layer + 10 * j + e).reshape(-1) for e in range(E)]
        wide = np.zeros((E, rows[0].size + stride_pad), dtype=np.uint8)
        wide[:, : rows[0].size] = np.stack(rows)
        tensors.append(ExpertTensor(f"blk.{layer}.ffn_{name}_exps.weight", qtype.ggml_id, (E, *shape),
                                    wide[:, : rows[0].size]))
    return ExpertLayer(layer, *tensors)


@pytest.fixture(scope="module")
def store():
    return quant_store_from_gguf({layer: fake_layer(layer, types, stride_pad=layer * 16)
                                  for layer, types in TYPES.items()}, CPU, pin=False)


def test_store_rows_hold_each_expert_packed(store):
    layer = fake_layer(0, TYPES[0])
    fmt = store.layout.for_layer(0)
    assert store.layout.numel == max(f.slot_bytes for f in store.layout.formats.values()) == fmt.slot_bytes
    assert store.expert_bytes == store.layout.numel and store.expert_bytes % 16 == 0
    for expert in (0, E - 1):
        packed = fmt.pack(layer.gate.raw[expert], layer.up.raw[expert], layer.down.raw[expert])
        assert torch.equal(store.blocks[0][expert], packed)


def test_store_refuses_mismatched_experts():
    good = fake_layer(1, TYPES[1])
    wide = ExpertTensor("blk.1.ffn_down_exps.weight", good.down.qtype, (E, D, 2 * I), good.down.raw)
    with pytest.raises(ModelFormatError, match="ffn_down.*expected"):
        quant_store_from_gguf({1: ExpertLayer(1, good.gate, good.up, wide)}, CPU, pin=False)
    short = ExpertTensor("blk.1.ffn_up_exps.weight", good.up.qtype, (E, I, D), good.up.raw[:, :-144])
    with pytest.raises(ModelFormatError, match="ffn_up.*bytes per expert"):
        quant_store_from_gguf({1: ExpertLayer(1, good.gate, short, good.down)}, CPU, pin=False)
    with pytest.raises(Exception, match="TQ1_0 .*not supported"):
        QuantLayout(D, I, {1: ("TQ1_0", "Q4_K", "Q4_K")})


def test_layout_is_per_layer():
    layout = QuantLayout(D, I, TYPES)
    assert {f.slot_bytes for f in layout.formats.values()} == {layout.numel}
    with pytest.raises(TypeError, match="for_layer"):
        layout.run_rows(None, None, None, None, None)


def routing(tokens: int, seed: int, device=CPU):
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(E, generator=g)[:TOP_K] for _ in range(tokens)])
    weights = torch.rand(tokens, TOP_K, generator=g)
    x = torch.randn(tokens, D, generator=g) * 0.5
    weights = (weights / weights.sum(-1, keepdim=True)).to(torch.bfloat16)
    return x.to(torch.bfloat16).to(device), ids.to(device), weights.to(device)


STEPS = [(1, 0), (3, 1), (40, 2), (1, 3), (2, 4), (40, 5), (1, 6)]  # (tokens, seed): 40 x top-2 is a large step


def outputs(provider, graphed: bool = False, device=CPU) -> list[torch.Tensor]:
    """Every step's layer outputs; graphed: decode steps through the provider's sync-free path where it has one
    (for the pager: the device LRU and the copy kernel moving whole padded rows, in Triton's interpreter)."""
    results = []
    for tokens, seed in STEPS:
        x, ids, weights = routing(tokens, seed, device)
        provider.begin_step(is_prefill=tokens > 8)
        path = provider.graph_path(tokens, TOP_K) if graphed else None
        if path is not None:
            path.begin_step(tokens, TOP_K)
        for layer in TYPES:
            results.append((path or provider).forward(layer, x, ids, weights))
    return results


def test_every_provider_and_slot_count_gives_the_same_bits(store):
    expected = outputs(ResidentExperts(store))
    assert all(torch.isfinite(out.float()).all() for out in expected)
    providers = [StaticOffloadExperts(store, CPU, num_offloaded_layers=2)]
    providers += [PagedExperts(store, CPU, {layer: slots for layer in TYPES}) for slots in (2, 3, 5, E)]
    for provider in providers:
        for got, want in zip(outputs(provider), expected):
            assert torch.equal(got, want), provider.name
    assert providers[1].counters.misses > providers[-1].counters.misses > 0  # 2 slots page far more than 8


@pytest.mark.skipif(not pager_kernels.runs_on(CPU), reason="needs Triton's interpreter")
@pytest.mark.parametrize("slots", [2, 5])
def test_graphed_decode_steps_give_the_same_bits(store, slots):
    expected = outputs(ResidentExperts(store))
    pager = PagedExperts(store, CPU, {layer: slots for layer in TYPES})
    assert pager.graph_path(1, TOP_K) is not None
    for got, want in zip(outputs(pager, graphed=True), expected):
        assert torch.equal(got, want)
    assert pager.counters.misses > 0


LEGACY_TYPES = {0: ("Q5_0", "Q5_1", "Q4_0"), 1: ("Q4_1", "Q4_1", "Q8_0")}  # llama.cpp's 32-element fallbacks


@pytest.mark.parametrize("types", [TYPES, expert_types("MXFP4_MOE", [0, 2], 3, D, I), LEGACY_TYPES,
                                   expert_types("Q2_K", [0], 3, D, I) | expert_types("Q3_K_M", [1], 3, D, I)
                                   | expert_types("IQ4_XS", [2], 3, D, I)],
                         ids=["k-quants", "MXFP4", "32-element", "low-bit"])
def test_synthetic_experts_are_finite_and_small(types):
    args = SimpleNamespace(hidden_size=D, expert_hidden_size=D, moe_intermediate_size=I, num_experts=4)
    store = synthetic_quant_experts(args, types, CPU, host=False)
    for layer in types:
        fmt = store.layout.for_layer(layer)
        for spec in (fmt.gate, fmt.up, fmt.down):
            weights = dequantize_reference(spec.raw(store.blocks[layer][3]), spec.qtype)
            assert torch.isfinite(weights).all() and weights.abs().max() <= WEIGHT_SCALE * 1.01
            assert weights.abs().max() > WEIGHT_SCALE / 50  # not all zero
