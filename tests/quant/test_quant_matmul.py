"""The long-step GEMM through a dense matrix in its blocks (engine.quant.quant_matmul) in Triton's interpreter on
small shapes, for every block type it reads: fp32 activations give dequantize-then-matmul within fp32 rounding,
bf16 ones within bf16 rounding, a row's bits do not depend on the rows beside it, and a matrix at a byte offset
inside a larger buffer reads its own blocks."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from engine.quant.linear import QuantLinearSpec, dequantize
from engine.quant import quant_matmul as qm
from engine.quant.quant_matmul import quant_matmul
from engine.quant.types import IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import random_matrix

pytestmark = pytest.mark.skipif(not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")


@pytest.fixture(autouse=True)
def small_tiles(monkeypatch):
    """16-row, 32-column tiles: the shapes here cover several of each (and interpret quickly)."""
    monkeypatch.setattr(qm, "TILES", "16,32,4,1")


def matrix(qtype, out_features, in_features, seed=0, lead_bytes=0):
    """(blocks with `lead_bytes` of other data before the matrix, its spec, its fp32 weight)."""
    body = torch.from_numpy(random_matrix(qtype, out_features, in_features, seed=seed).reshape(-1).copy())
    blocks = torch.cat([torch.full((lead_bytes,), 0xFF, dtype=torch.uint8), body])
    spec = QuantLinearSpec(qtype, out_features, in_features, lead_bytes)
    return blocks, spec, dequantize(body, QuantLinearSpec(qtype, out_features, in_features), torch.float32)


def inputs(rows, in_features, dtype, seed=0):
    return torch.randn(rows, in_features, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("qtype,out_features,in_features,rows", [(Q4_K, 96, 512, 40), (Q6_K, 64, 256, 16),
                                                                 (Q8_0, 80, 512, 33), (Q5_K, 64, 256, 20),
                                                                 (MXFP4, 64, 256, 18), (Q8_0, 48, 352, 17),
                                                                 (Q5_0, 48, 352, 17), (Q5_1, 32, 96, 9),
                                                                 (Q3_K, 48, 512, 9), (Q2_K, 32, 256, 17),
                                                                 (IQ4_XS, 32, 512, 9), (IQ4_NL, 48, 352, 17)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_fp32_is_dequantize_then_matmul(qtype, out_features, in_features, rows):
    blocks, spec, weight = matrix(qtype, out_features, in_features)
    x = inputs(rows, in_features, torch.float32)
    got = quant_matmul(x, blocks, spec)
    expected = F.linear(x.double(), weight.double())
    assert got.shape == (rows, out_features) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("qtype", [Q4_K, Q6_K, Q8_0], ids=lambda t: t.name)
def test_bf16_is_the_product_of_the_bf16_weight_within_rounding(qtype):
    blocks, spec, weight = matrix(qtype, 72, 512, seed=1)
    x = inputs(24, 512, torch.bfloat16, seed=1)
    got = quant_matmul(x, blocks, spec)
    expected = F.linear(x.double(), weight.bfloat16().double())  # fp64 sum of the bf16 products, then one rounding
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), expected, rtol=2**-8, atol=2**-8 * expected.abs().max().item())


def test_a_row_does_not_depend_on_the_rows_beside_it():
    blocks, spec, _ = matrix(Q4_K, 64, 256, seed=2)
    x = inputs(37, 256, torch.bfloat16, seed=2)
    whole = quant_matmul(x, blocks, spec)
    assert torch.equal(quant_matmul(x[5:26], blocks, spec), whole[5:26])
    assert torch.equal(quant_matmul(x, blocks, spec), whole)


@pytest.mark.parametrize("qtype", [Q4_K, Q6_K], ids=lambda t: t.name)
def test_a_matrix_inside_a_larger_buffer_reads_its_own_blocks(qtype):
    blocks, spec, weight = matrix(qtype, 32, 256, seed=3, lead_bytes=spec_bytes(qtype))
    x = inputs(17, 256, torch.float32, seed=3)
    expected = F.linear(x.double(), weight.double())
    torch.testing.assert_close(quant_matmul(x, blocks, spec).double(), expected, rtol=1e-5,
                               atol=1e-5 * expected.abs().max().item())


def spec_bytes(qtype) -> int:
    """The bytes of a [32, 256] matrix of qtype: a word-aligned offset for the word-wide tiles."""
    return QuantLinearSpec(qtype, 32, 256).nbytes
