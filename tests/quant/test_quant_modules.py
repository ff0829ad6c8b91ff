"""The quantized dense layers on the CPU: QuantLinear against dequantize-then-matmul at every row count (the GEMV
below GEMV_ROWS, tiled dequantization above), its rows independent of the step they share, and QuantEmbedding
against a lookup in the dequantized table."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.quant import quant_modules
from engine.quant.linear import QuantLinearSpec, dequantize
from engine.quant.quant_modules import GEMV_ROWS, QuantEmbedding, QuantLinear, weight_bytes
from engine.quant.types import MXFP4, Q4_K, Q5_K, Q6_K, Q8_0
from tests.quant.blocks import random_matrix

OUT, IN = 40, 512


def layer(qtype, bias: bool = False, seed: int = 0) -> tuple[QuantLinear, torch.Tensor]:
    """A QuantLinear of random blocks and its weight dequantized to fp32."""
    spec = QuantLinearSpec(qtype, OUT, IN)
    blocks = torch.from_numpy(random_matrix(qtype, OUT, IN, seed=seed).reshape(-1).copy())
    module = QuantLinear(blocks, spec, bias=bias)
    if bias:
        module.bias = torch.nn.Parameter(torch.randn(OUT, generator=torch.Generator().manual_seed(seed)),
                                         requires_grad=False)
    return module, dequantize(blocks, spec, torch.float32)


@pytest.mark.parametrize("qtype", [Q8_0, Q4_K, Q5_K, Q6_K, MXFP4], ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [1, 3, GEMV_ROWS, GEMV_ROWS + 1, 37])
@pytest.mark.parametrize("bias", [False, True])
def test_quant_linear_is_dequantize_then_matmul(qtype, rows, bias):
    module, weight = layer(qtype, bias)
    x = torch.randn(rows, IN, generator=torch.Generator().manual_seed(rows))
    expected = F.linear(x.double(), weight.double(), None if module.bias is None else module.bias.double())
    got = module(x)
    assert got.shape == (rows, OUT) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


def test_bf16_activations_stay_bf16_within_rounding():
    module, weight = layer(Q4_K)
    for rows in (2, 20):
        x = torch.randn(rows, IN, generator=torch.Generator().manual_seed(0)).bfloat16()
        got = module(x)
        expected = F.linear(x.double(), weight.bfloat16().double())
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.double(), expected, rtol=2**-7, atol=2**-7 * expected.abs().max().item())


def test_a_decode_row_does_not_depend_on_the_rows_beside_it():
    module, _ = layer(Q6_K)
    x = torch.randn(GEMV_ROWS, IN, generator=torch.Generator().manual_seed(3))
    together = module(x)
    for i in range(GEMV_ROWS):
        assert torch.equal(module(x[i : i + 1])[0], together[i])


def test_a_long_step_dequantizes_in_tiles_with_the_same_result(monkeypatch):
    """Within fp32 rounding: the CPU's GEMM blocks a 7-row weight otherwise than the whole one (seen with MKL held to
    AVX2: up to 3e-5 apart on outputs up to ~126), while a tile that read the wrong rows would be off by the
    outputs' size."""
    module, _ = layer(Q8_0, bias=True)
    x = torch.randn(GEMV_ROWS * 3, IN, generator=torch.Generator().manual_seed(4))
    whole = module(x)
    monkeypatch.setattr(quant_modules, "DEQUANT_TILE_BYTES", 7 * IN * 4)  # 7-row tiles: 6 tiles, the last short
    assert quant_modules.tile_rows(module.spec, 4) == 7
    torch.testing.assert_close(module(x), whole, rtol=1e-4, atol=1e-4 * whole.abs().max().item())


def test_quant_embedding_rows_are_the_dequantized_table_rows():
    spec = QuantLinearSpec(Q4_K, 64, IN)
    blocks = torch.from_numpy(random_matrix(Q4_K, 64, IN, seed=5).reshape(-1).copy())
    table = dequantize(blocks, spec, torch.bfloat16)
    embedding = QuantEmbedding(blocks, spec, torch.bfloat16)
    ids = torch.tensor([[3, 63, 3], [0, 17, 40]])
    assert torch.equal(embedding(ids), table[ids])
    assert weight_bytes(embedding) == spec.nbytes < table.numel() * 2
