"""QuantExpertFormat: the slot layout, and its two compute paths (gathered GEMVs for small steps, dequantize
then engine.experts.formats.kernel.run_expert for large ones) against the gguf dequantization and float64 math."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.experts.routing.dispatch import combine_grouped, plan_dispatch
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.reference import dequantize_reference
from tests.quant import moe_reference
from tests.quant.blocks import gguf_type, random_experts
from tests.quant.moe_reference import FORMATS, float64_moe

gguf_quants = pytest.importorskip("gguf.quants")
D, I, E = 256, 512, 6


@pytest.fixture(params=list(FORMATS), scope="module")
def experts(request):
    layout = QuantExpertFormat(D, I, *FORMATS[request.param])
    table, parts = random_experts(layout, E, seed=1)
    dense = [tuple(gguf_quants.dequantize(raw, gguf_type(spec.qtype)).astype(np.float64)
                   for raw, spec in zip(p, (layout.gate, layout.up, layout.down))) for p in parts]
    return layout, table, dense


def routed(num_tokens: int, top_k: int = 4, seed: int = 0):
    return moe_reference.routed(num_tokens, E, top_k, seed)


def test_slot_layout():
    layout = QuantExpertFormat(2048, 768, "Q4_K", "Q4_K", "Q6_K")
    assert (layout.gate.byte_offset, layout.up.byte_offset) == (0, 768 * 1152)
    assert layout.down.byte_offset == 2 * 768 * 1152 and layout.down.nbytes == 2048 * 630
    assert layout.slot_bytes % 16 == 0 and layout.slot_bytes - layout.down.end < 16
    assert layout.gate_up is not None and layout.gate_up.out_features == 1536
    odd = QuantExpertFormat(256, 32, "Q8_0", "Q8_0", "Q8_0")  # gate: 32 rows of 272 bytes, not 16-aligned
    assert odd.up.byte_offset % 16 == 0 and odd.down.byte_offset % 16 == 0 and odd.slot_bytes % 16 == 0
    with pytest.raises(ValueError, match="bytes"):
        layout.pack(np.zeros(5, np.uint8), np.zeros(5, np.uint8), np.zeros(5, np.uint8))


def test_pack_places_each_matrix(experts):
    layout, table, dense = experts
    gate_up, down = layout.weights(table[2], torch.float32)
    assert torch.equal(gate_up.double(), torch.from_numpy(np.concatenate(dense[2][:2])))
    assert torch.equal(down.double(), torch.from_numpy(dense[2][2]))
    gate = dequantize_reference(layout.gate.raw(table[2]), layout.gate.qtype)
    assert torch.equal(gate.double(), torch.from_numpy(dense[2][0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_run_rows_matches_float64(experts, dtype):
    layout, table, dense = experts
    ids, weights = routed(3)
    x = (torch.randn(3, D, generator=torch.Generator().manual_seed(3)) * 0.05).to(dtype)
    got = layout.run_rows(x, table, ids.reshape(-1), ids, weights.to(dtype))
    expected = float64_moe(x, ids, weights.to(dtype).double(), dense)
    tolerance = 1e-4 if dtype == torch.float32 else 3e-2
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())


def test_run_rows_is_batch_invariant_and_slot_independent(experts):
    layout, table, _ = experts
    ids, weights = routed(5, seed=4)
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16) * 0.05
    weights = weights.to(torch.bfloat16)
    every = layout.run_rows(x, table, ids.reshape(-1), ids, weights)
    moved = torch.cat([table.flip(0), table])  # expert e now also lives in row 2E - 1 - e and E + e
    for t in range(5):
        one = layout.run_rows(x[t : t + 1], moved, ids[t] + E, ids[t : t + 1], weights[t : t + 1])
        assert torch.equal(one, every[t : t + 1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_run_expert_matches_dequantize_then_linear(experts, dtype):
    layout, table, dense = experts
    ids, weights = routed(6, seed=6)
    x = (torch.randn(6, D, generator=torch.Generator().manual_seed(7)) * 0.05).to(dtype)
    weights = weights.to(dtype)
    dispatch = plan_dispatch(ids.numpy(), weights)
    out = x[dispatch.tokens]
    for u, expert in enumerate(dispatch.experts):
        layout.run_expert(table[int(expert)], dispatch, u, out)
    got = combine_grouped(out, dispatch, ids)
    # the same as dequantizing to dtype and running the bf16 expert math on it
    expected = torch.zeros_like(x)
    for t in range(6):
        for k in torch.argsort(ids[t]).tolist():
            gate_up, down = layout.weights(table[int(ids[t, k])], dtype)
            gate, up = F.linear(x[t : t + 1], gate_up).chunk(2, dim=-1)
            expected[t] += (F.linear(F.silu(gate) * up, down) * weights[t, k])[0]
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance * expected.abs().max().item())
    reference = float64_moe(x, ids, weights.double(), dense)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    np.testing.assert_allclose(got.double().numpy(), reference, rtol=tolerance,
                               atol=tolerance * np.abs(reference).max())
