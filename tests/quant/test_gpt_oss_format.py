"""Quantized experts with gpt-oss's expert math (engine.experts.formats.activation): per-expert biases indexed by
expert id and the clamped SwiGLU between the projections, on both compute paths (gathered GEMVs, dequantize then
the dense math) against float64; batch invariant; and every provider giving the same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.experts.formats.activation import ClampedSwiGlu, ExpertBias
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.experts.providers.static import StaticOffloadExperts
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.gguf_store import quant_store_from_gguf
from tests.quant import test_quant_providers as providers
from tests.quant.blocks import random_experts
from tests.quant.moe_reference import both_paths, dense_experts, routed

D, I, E = 128, 64, 6
ACTIVATION = ClampedSwiGlu(alpha=1.702, limit=0.05)  # a limit the random experts' projections cross
FORMATS = {"MXFP4": ("MXFP4",) * 3, "mixed": ("MXFP4", "MXFP4", "Q8_0")}


def random_bias(num_experts: int, hidden: int, intermediate: int, seed: int) -> ExpertBias:
    g = torch.Generator().manual_seed(seed)
    return ExpertBias(gate_up=torch.randn(num_experts, 2 * intermediate, generator=g) * 0.02,
                      down=torch.randn(num_experts, hidden, generator=g) * 0.02)


@pytest.fixture(params=list(FORMATS), scope="module")
def experts(request):
    bias = random_bias(E, D, I, seed=1)
    layout = QuantExpertFormat(D, I, *FORMATS[request.param], activation=ACTIVATION, bias=bias)
    table, parts = random_experts(layout, E, seed=2)
    return layout, table, dense_experts(layout, parts), bias


def float64_gpt_oss(x, ids, weights, dense, bias: ExpertBias) -> np.ndarray:
    """sum_k w_k * (down_k(act(gate_k x + b, up_k x + b)) + b) per token, float64, transformers' op order."""
    alpha, limit = ACTIVATION.alpha, ACTIVATION.limit
    gate_bias, up_bias = bias.gate_up.double().numpy()[:, :I], bias.gate_up.double().numpy()[:, I:]
    out = np.zeros((x.shape[0], D))
    for t in range(x.shape[0]):
        xt = x[t].double().numpy()
        for k, e in enumerate(ids[t].tolist()):
            gate, up, down = dense[e]
            g = np.minimum(gate @ xt + gate_bias[e], limit)
            u = np.clip(up @ xt + up_bias[e], -limit, limit)
            h = (u + 1) * g / (1 + np.exp(-alpha * g))
            out[t] += float(weights[t, k]) * (down @ h + bias.down[e].double().numpy())
    return out


def test_the_clamp_is_reached(experts):
    layout, table, dense, bias = experts
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(3))
    gate = np.stack([dense[e][0] @ x[0].double().numpy() for e in range(E)]) + bias.gate_up[:, :I].double().numpy()
    assert (gate > ACTIVATION.limit).mean() > 0.1 and (gate < ACTIVATION.limit).mean() > 0.1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_both_paths_match_float64(experts, dtype):
    layout, table, dense, bias = experts
    ids, weights = routed(5, E, top_k=3, seed=4)
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(5)).to(dtype)
    weights = weights.to(dtype)
    typed = ExpertBias(bias.gate_up.to(dtype), bias.down.to(dtype))
    layout = QuantExpertFormat(D, I, *layout.types, activation=ACTIVATION, bias=typed)
    small, large = both_paths(layout, table, x, ids, weights)
    expected = float64_gpt_oss(x, ids, weights.double(), dense, typed)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    for got in (small, large):
        np.testing.assert_allclose(got.double().numpy(), expected, rtol=tolerance,
                                   atol=tolerance * np.abs(expected).max())


def test_gathered_path_is_batch_invariant_and_needs_ids(experts):
    layout, table, _, _ = experts
    ids, weights = routed(4, E, top_k=2, seed=6)
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    weights = weights.to(torch.bfloat16)
    every = layout.run_rows(x, table, ids.reshape(-1), ids, weights)
    for t in range(4):
        assert torch.equal(layout.run_rows(x[t : t + 1], table, ids[t], ids[t : t + 1], weights[t : t + 1]),
                           every[t : t + 1])
    with pytest.raises(TypeError, match="expert id"):
        layout.run_gathered(x, table[ids.reshape(-1)], weights)


def test_every_provider_gives_the_same_bits():
    """test_quant_providers' layers and steps, with biases per layer and the clamped SwiGLU."""
    biases = {layer: random_bias(providers.E, providers.D, providers.I, seed=10 + layer) for layer in providers.TYPES}
    biases = {layer: ExpertBias(b.gate_up.to(torch.bfloat16), b.down.to(torch.bfloat16)) for layer, b in biases.items()}
    layers = {layer: providers.fake_layer(layer, types) for layer, types in providers.TYPES.items()}
    store = quant_store_from_gguf(layers, providers.CPU, pin=False, activation=ACTIVATION, biases=biases)
    expected = providers.outputs(ResidentExperts(store))
    plain = quant_store_from_gguf(layers, providers.CPU, pin=False)
    assert not torch.equal(providers.outputs(ResidentExperts(plain))[0], expected[0])  # the biases count
    runs = [StaticOffloadExperts(store, providers.CPU, num_offloaded_layers=2)]
    runs += [PagedExperts(store, providers.CPU, {layer: slots for layer in providers.TYPES}) for slots in (2, 5)]
    for provider in runs:
        for got, want in zip(providers.outputs(provider), expected):
            assert torch.equal(got, want), provider.name
