"""The Triton kernels on tiny shapes in Triton's interpreter (CPU): dequantization bit-exact against the torch
reference; the gathered GEMV within fp32 rounding of the reference GEMV (the two sum in different orders),
exactly batch invariant."""

from __future__ import annotations

import os

import pytest
import torch

from engine.quant.linear import (QuantLinearSpec, dequantize_rows, dequantize_triton, gathered_gemv_reference,
                                 gathered_gemv_triton)
from engine.quant.reference import dequantize_reference
from engine.quant.types import IQ4_NL, MXFP4, Q4_1, Q5_0, Q8_0
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import ALL_TYPES, random_matrix, random_rows

pytestmark = pytest.mark.skipif(not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")
OUT, IN, OFFSET = 20, 512, 32


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_dequantize_kernel_is_bit_exact(qtype):
    raw = torch.from_numpy(random_rows(qtype, OUT, IN, seed=7, max_exponent=30 if qtype.block_size > 1 else 14))
    buffer = torch.cat([torch.zeros(OFFSET, dtype=torch.uint8), raw.reshape(-1)])
    spec = QuantLinearSpec(qtype, OUT, IN, OFFSET)
    expected = dequantize_reference(raw, qtype)
    got = dequantize_triton(buffer, spec, torch.float32)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))
    assert torch.equal(dequantize_triton(buffer, spec, torch.bfloat16), expected.to(torch.bfloat16))


@pytest.mark.parametrize("qtype", [Q8_0, MXFP4, Q4_1, Q5_0, IQ4_NL], ids=lambda t: t.name)
def test_dequantize_kernel_masks_a_partial_tile(qtype):  # 96 columns: three of a tile's eight blocks
    raw = torch.from_numpy(random_rows(qtype, 5, 96, seed=3))
    got = dequantize_triton(raw.reshape(-1), QuantLinearSpec(qtype, 5, 96), torch.float32)
    assert torch.equal(got, dequantize_reference(raw, qtype))


def test_dequantize_rows_through_the_kernel(monkeypatch):
    import engine.quant.linear as linear

    qtype = ALL_TYPES[6]  # Q6_K
    raw = torch.from_numpy(random_rows(qtype, 30, 256, seed=4))
    spec = QuantLinearSpec(qtype, 30, 256)
    monkeypatch.setattr(linear, "uses_triton", lambda device: True)  # the CUDA path, run by the interpreter
    got = dequantize_rows(raw.reshape(-1), spec, torch.tensor([29, 0, 29]), torch.bfloat16)
    assert torch.equal(got, dequantize_reference(raw, qtype)[[29, 0, 29]].to(torch.bfloat16))


def table_of(qtype, num_slots=3):
    spec = QuantLinearSpec(qtype, OUT, IN, OFFSET)
    table = torch.zeros(num_slots, spec.end + 16, dtype=torch.uint8)
    for s in range(num_slots):
        table[s, OFFSET : spec.end] = torch.from_numpy(random_matrix(qtype, OUT, IN, seed=s).reshape(-1))
    return spec, table


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("glu", [False, True], ids=["plain", "glu"])
def test_gathered_gemv_kernel_matches_reference(qtype, glu):
    spec, table = table_of(qtype)
    rows = torch.tensor([2, 0, 2, 1])
    x = torch.randn(2, IN * (2 if glu else 1), generator=torch.Generator().manual_seed(qtype.ggml_id))
    got = gathered_gemv_triton(x, table, rows, spec, glu=glu, x_div=2)
    expected = gathered_gemv_reference(x, table, rows, spec, glu=glu, x_div=2)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
    single = gathered_gemv_triton(x[1:], table, rows[3:], spec, glu=glu)
    assert torch.equal(single, got[3:])  # entry 3 alone: the same bits


def test_gathered_gemv_kernel_bf16_activations():
    spec, table = table_of(ALL_TYPES[4])
    rows = torch.tensor([1, 2, 0])
    x = torch.randn(3, 2 * IN, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    got = gathered_gemv_triton(x, table, rows, spec, glu=True)
    expected = gathered_gemv_reference(x, table, rows, spec, glu=True)
    assert got.dtype == torch.bfloat16
    # silu's exp differs in the last bits between Triton and torch, which can move h by one bf16 step
    torch.testing.assert_close(got.float(), expected.float(), rtol=2**-6, atol=2**-6 * expected.abs().max().item())
    for i in range(3):
        assert torch.equal(gathered_gemv_triton(x[i : i + 1], table, rows[i : i + 1], spec, glu=True), got[i : i + 1])
