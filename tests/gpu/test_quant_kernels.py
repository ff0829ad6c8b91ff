"""The quantized-expert Triton kernels on the H200: `pytest -m gpu tests/gpu/test_quant_kernels.py`.
Dequantization bit-exact against the torch reference (fp fusion off), the gathered GEMV within fp32 rounding of
the reference and exactly batch invariant, the expert format's two paths against float64, and every provider
giving the same bits on quantized experts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.experts.providers.static import StaticOffloadExperts
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.linear import (QuantLinearSpec, dequantize, gathered_gemv, gathered_gemv_reference, gathered_swiglu,
                                 glu_input, scaled_gemv)
from engine.quant.reference import dequantize_reference
from engine.quant.synthetic import synthetic_quant_experts
from tests.quant import test_quant_providers as providers
from tests.quant.blocks import ALL_TYPES, random_experts, random_matrix, random_rows
from tests.quant.moe_reference import FORMATS, both_paths, dense_experts, float64_moe, routed

pytestmark = pytest.mark.gpu
OUT, IN, OFFSET = 200, 1024, 64


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_is_bit_exact(cuda, qtype):
    raw = torch.from_numpy(random_rows(qtype, OUT, IN, seed=11, max_exponent=30 if qtype.block_size > 1 else 14))
    buffer = torch.cat([torch.zeros(OFFSET, dtype=torch.uint8), raw.reshape(-1)]).to(cuda)
    spec = QuantLinearSpec(qtype, OUT, IN, OFFSET)
    expected = dequantize_reference(raw, qtype).to(cuda)
    assert torch.equal(dequantize(buffer, spec, torch.float32).view(torch.int32), expected.view(torch.int32))
    assert torch.equal(dequantize(buffer, spec, torch.bfloat16), expected.to(torch.bfloat16))
    assert torch.equal(dequantize_reference(raw.to(cuda), qtype).view(torch.int32), expected.view(torch.int32))


def table_of(qtype, cuda, num_slots=5):
    spec = QuantLinearSpec(qtype, OUT, IN, OFFSET)
    table = torch.zeros(num_slots, spec.end + 16, dtype=torch.uint8)
    for s in range(num_slots):
        table[s, OFFSET : spec.end] = torch.from_numpy(random_matrix(qtype, OUT, IN, seed=s).reshape(-1))
    return spec, table.to(cuda)


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("glu", [False, True], ids=["plain", "glu"])
def test_gathered_gemv(cuda, qtype, dtype, glu):
    spec, table = table_of(qtype, cuda)
    rows = torch.tensor([4, 0, 2, 2, 1, 3, 0, 4], device=cuda)
    x = torch.randn(8, IN * (2 if glu else 1), device=cuda, generator=torch.Generator(cuda).manual_seed(1)).to(dtype)
    got = gathered_gemv(x, table, rows, spec, glu=glu)
    expected = gathered_gemv_reference(x.cpu(), table.cpu(), rows.cpu(), spec, glu=glu).to(cuda)
    tolerance = 1e-5 if dtype == torch.float32 else 2**-6
    torch.testing.assert_close(got.float(), expected.float(), rtol=tolerance,
                               atol=tolerance * expected.float().abs().max().item())
    for i in range(8):  # batch invariance: each entry alone gives the same bits
        assert torch.equal(gathered_gemv(x[i : i + 1], table, rows[i : i + 1], spec, glu=glu), got[i : i + 1])
    shared = gathered_gemv(x[:2], table, rows[:6], spec, glu=glu, x_div=3)  # entries 0-2 read x[0], 3-5 x[1]
    assert torch.equal(shared, gathered_gemv(x[[0, 0, 0, 1, 1, 1]], table, rows[:6], spec, glu=glu))


@pytest.mark.parametrize("types", [("Q4_K", "Q4_K", "Q6_K"), ("Q4_K",) * 3, ("Q8_0",) * 3],
                         ids=["Q4_K_M", "Q4_K", "Q8_0"])
def test_word_gemv_at_the_expert_shape(cuda, types):
    """Qwen3-30B-A3B's experts (2048 -> 768 -> 2048): the decode GEMVs (wide for Q4_K and Q6_K, word for Q8_0) with
    their SwiGLU and routing-weight epilogues within bf16 rounding of the reference ops, every entry's bits its own."""
    layout = QuantExpertFormat(2048, 768, *types)
    table, _ = random_experts(layout, 6, seed=5)
    table = table.to(cuda)
    rows = torch.tensor([5, 0, 2, 2, 1, 3, 0, 4], device=cuda)
    x = (torch.randn(1, 2048, device=cuda, generator=torch.Generator(cuda).manual_seed(2)) * 0.05).to(torch.bfloat16)
    h = gathered_swiglu(x, table, rows, layout.gate_up, x_div=8)
    expected_h = glu_input(gathered_gemv_reference(x.cpu(), table.cpu(), rows.cpu(), layout.gate_up, x_div=8))
    torch.testing.assert_close(h.float().cpu(), expected_h.float(), rtol=2**-6,
                               atol=2**-6 * expected_h.float().abs().max().item())
    w = torch.rand(8, device=cuda).to(torch.bfloat16)
    y = scaled_gemv(h, table, rows, layout.down, w)
    expected_y = (gathered_gemv_reference(h.cpu(), table.cpu(), rows.cpu(), layout.down) * w.cpu()[:, None])
    torch.testing.assert_close(y.float().cpu(), expected_y.float(), rtol=2**-6,
                               atol=2**-6 * expected_y.float().abs().max().item())
    for i in range(8):  # batch invariance: each entry alone gives the same bits
        assert torch.equal(gathered_swiglu(x, table, rows[i : i + 1], layout.gate_up), h[i : i + 1])
        assert torch.equal(scaled_gemv(h[i : i + 1], table, rows[i : i + 1], layout.down, w[i : i + 1]), y[i : i + 1])


@pytest.mark.parametrize("name", list(FORMATS))
def test_expert_format_paths(cuda, name):
    D, I, E = 512, 256, 6
    layout = QuantExpertFormat(D, I, *FORMATS[name])
    table, parts = random_experts(layout, E, seed=2)
    dense = dense_experts(layout, parts)
    ids, weights = routed(4, E, top_k=3, seed=3)
    x = (torch.randn(4, D, generator=torch.Generator().manual_seed(4)) * 0.05).to(torch.bfloat16)
    w = weights.to(torch.bfloat16)
    table_gpu, x_gpu, ids_gpu, w_gpu = table.to(cuda), x.to(cuda), ids.to(cuda), w.to(cuda)
    small, large = both_paths(layout, table_gpu, x_gpu, ids_gpu, w_gpu)
    reference = float64_moe(x, ids, w.double(), dense)
    for got in (small, large):
        np.testing.assert_allclose(got.double().cpu().numpy(), reference, rtol=5e-2,
                                   atol=5e-2 * np.abs(reference).max())
    for t in range(4):
        one = layout.run_rows(x_gpu[t : t + 1], table_gpu, ids_gpu[t], ids_gpu[t : t + 1], w_gpu[t : t + 1])
        assert torch.equal(one, small[t : t + 1])


def test_providers_give_the_same_bits(cuda):
    """Resident, static offload and paged (host pager, and the graphed path's device LRU and copy kernel) at
    several slot counts, on synthetic experts whose layers mix types; pinned host experts for the offloaded."""
    args = SimpleNamespace(hidden_size=providers.D, moe_intermediate_size=providers.I, num_experts=providers.E)
    resident = ResidentExperts(synthetic_quant_experts(args, providers.TYPES, cuda, host=False))
    host = synthetic_quant_experts(args, providers.TYPES, cuda, host=True)
    assert host.is_pinned and torch.equal(host.blocks[0], resident.store.blocks[0].cpu())
    expected = providers.outputs(resident, device=cuda)
    runs = [(StaticOffloadExperts(host, cuda, num_offloaded_layers=2), False)]
    runs += [(PagedExperts(host, cuda, {layer: slots for layer in providers.TYPES}), graphed)
             for slots in (2, 5, providers.E) for graphed in (False, True)]
    for provider, graphed in runs:
        for got, want in zip(providers.outputs(provider, graphed, device=cuda), expected):
            assert torch.equal(got, want), (provider.name, graphed)
