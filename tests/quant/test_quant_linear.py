"""The CPU path of the quantized matrix ops: dequantize to a dtype and the gathered GEMV, against the `gguf`
package's dequantization and float64 math; batch invariance of the GEMV."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.quant.linear import QuantLinearSpec, dequantize, dequantize_rows, gathered_gemv
from engine.quant.types import MXFP4, Q6_K
from tests.quant.blocks import ALL_TYPES, gguf_type, random_matrix

gguf_quants = pytest.importorskip("gguf.quants")
OUT, IN, OFFSET = 24, 512, 48


def slot_table(qtype, num_slots=3):
    spec = QuantLinearSpec(qtype, OUT, IN, OFFSET)
    table = torch.zeros(num_slots, spec.end + 16, dtype=torch.uint8)
    raws = [random_matrix(qtype, OUT, IN, seed=s) for s in range(num_slots)]
    for s, raw in enumerate(raws):
        table[s, OFFSET : spec.end] = torch.from_numpy(raw.reshape(-1))
    dense = [gguf_quants.dequantize(raw, gguf_type(qtype)).astype(np.float64) for raw in raws]  # [OUT, IN] each
    return spec, table, dense


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_to_dtype(qtype):
    spec, table, dense = slot_table(qtype)
    for dtype in (torch.float32, torch.bfloat16):
        got = dequantize(table[1], spec, dtype)
        assert got.dtype == dtype and torch.equal(got, torch.from_numpy(dense[1]).float().to(dtype))


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_gathered_gemv_matches_float64(qtype):
    spec, table, dense = slot_table(qtype)
    rows = torch.tensor([2, 0, 2, 1])
    x = torch.randn(2, IN, generator=torch.Generator().manual_seed(0))
    got = gathered_gemv(x, table, rows, spec, x_div=2)  # entry i reads x[i // 2]
    expected = np.stack([dense[r] @ x[i // 2].double().numpy() for i, r in enumerate(rows.tolist())])
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("qtype", [Q6_K, MXFP4], ids=lambda t: t.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gathered_gemv_glu_input(dtype, qtype):
    spec, table, dense = slot_table(qtype)
    rows = torch.tensor([1, 0])
    gate_up = torch.randn(2, 2 * IN, generator=torch.Generator().manual_seed(1)).to(dtype)
    gate, up = gate_up.chunk(2, dim=-1)
    h = (F.silu(gate) * up).double().numpy()  # the input rounded to dtype, as kernel.gathered_experts rounds it
    got = gathered_gemv(gate_up, table, rows, spec, glu=True)
    expected = np.stack([dense[r] @ h[i] for i, r in enumerate(rows.tolist())])
    tolerance = 1e-5 if dtype == torch.float32 else 2**-7
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gathered_gemv_is_batch_invariant(dtype):
    spec, table, _ = slot_table(ALL_TYPES[4])
    rows = torch.tensor([0, 2, 1, 2, 0, 1, 1])
    x = torch.randn(7, IN, generator=torch.Generator().manual_seed(2)).to(dtype)
    every = gathered_gemv(x, table, rows, spec)
    for i in range(7):
        assert torch.equal(gathered_gemv(x[i : i + 1], table, rows[i : i + 1], spec), every[i : i + 1])


def test_gemv_refuses_the_wrong_width():
    spec, table, _ = slot_table(ALL_TYPES[3])
    with pytest.raises(ValueError, match="features"):
        gathered_gemv(torch.zeros(1, IN + 32), table, torch.zeros(1, dtype=torch.long), spec)
    with pytest.raises(ValueError, match="twice"):
        gathered_gemv(torch.zeros(1, IN), table, torch.zeros(1, dtype=torch.long), spec, glu=True)


@pytest.mark.parametrize("qtype", ALL_TYPES[3:], ids=lambda t: t.name)
def test_dequantize_rows_is_an_embedding_lookup(qtype):
    spec, table, dense = slot_table(qtype)
    ids = torch.tensor([[3, 0], [3, 23]])
    got = dequantize_rows(table[2], spec, ids, torch.float32)
    assert got.shape == (2, 2, IN) and torch.equal(got.double(), torch.from_numpy(dense[2][ids.numpy()]))
