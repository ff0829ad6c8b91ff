"""engine.quant.gemv_kernels' word-wide GEMV on tiny shapes in Triton's interpreter (CPU): within fp32 rounding of
the reference GEMV (the two sum in different orders), exactly batch invariant, its SwiGLU and routing-weight
epilogues as the torch ops round them."""

from __future__ import annotations

import os

import pytest
import torch

from engine.quant.linear import (QuantLinearSpec, any_word_split, gathered_gemv_reference, glu_input,
                                 word_gemv_triton)
from engine.quant.types import Q4_K, Q5_K, Q6_K, Q8_0
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import random_matrix

pytestmark = pytest.mark.skipif(not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")
WORD_TYPES = (Q8_0, Q4_K, Q5_K, Q6_K)
OUT, OFFSET = 10, 32


def table_of(qtype, in_features, out=OUT, num_slots=3):
    spec = QuantLinearSpec(qtype, out, in_features, OFFSET)
    table = torch.zeros(num_slots, spec.end + 16, dtype=torch.uint8)
    for s in range(num_slots):
        table[s, OFFSET : spec.end] = torch.from_numpy(random_matrix(qtype, out, in_features, seed=s).reshape(-1))
    return spec, table


def close(got, expected, rtol=1e-5):
    scale = expected.float().abs().max().item()
    torch.testing.assert_close(got.float(), expected.float(), rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("qtype", WORD_TYPES, ids=lambda t: t.name)
def test_word_gemv_matches_reference(qtype):
    spec, table = table_of(qtype, 768)  # three super-blocks: a step of four masks one
    rows = torch.tensor([2, 0, 2, 1])
    x = torch.randn(2, 768, generator=torch.Generator().manual_seed(qtype.ggml_id))
    got = word_gemv_triton(x, table, rows, spec, x_div=2)
    close(got, gathered_gemv_reference(x, table, rows, spec, x_div=2))
    for supers in (1, 2, 4, 8):  # super-blocks a step: 768 columns leave 1 of 4 and 5 of 8 masked
        close(word_gemv_triton(x, table, rows, spec, x_div=2, split=(4, supers, 1)), got)
    assert torch.equal(word_gemv_triton(x[1:], table, rows[3:], spec), got[3:])  # entry 3 alone: the same bits
    _, supers, _ = any_word_split(spec)
    assert torch.equal(word_gemv_triton(x, table, rows, spec, x_div=2, split=(8, supers, 1)), got)  # rows per program


def test_word_gemv_q8_0_partial_tile():  # 96 columns: three of a tile's eight blocks
    spec, table = table_of(Q8_0, 96)
    rows = torch.tensor([1, 0])
    x = torch.randn(2, 96, generator=torch.Generator().manual_seed(3))
    close(word_gemv_triton(x, table, rows, spec), gathered_gemv_reference(x, table, rows, spec))


@pytest.mark.parametrize("qtype", [Q4_K, Q6_K], ids=lambda t: t.name)
def test_word_gemv_swiglu_and_scale_epilogues(qtype):
    spec, table = table_of(qtype, 256, out=12)
    rows = torch.tensor([1, 2, 0])
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    gate_up = word_gemv_triton(x, table, rows, spec)
    h = word_gemv_triton(x, table, rows, spec, swiglu=True)
    assert h.shape == (3, 6) and h.dtype == torch.bfloat16
    # silu's exp differs in the last bits between Triton and torch, which can move h by one bf16 step
    close(h, glu_input(gate_up), rtol=2**-7)
    w = torch.tensor([0.25, 0.5, 0.75], dtype=torch.bfloat16)
    scaled = word_gemv_triton(x, table, rows, spec, scale=w)
    assert torch.equal(scaled, (gate_up * w[:, None]).to(torch.bfloat16))


@pytest.mark.slow  # ~80 s (interpreted Triton kernels): the README command's budget
def test_expert_format_small_step_through_the_word_kernels(monkeypatch):
    import engine.quant.linear as linear
    from engine.quant.expert_format import QuantExpertFormat
    from tests.quant.blocks import random_experts
    from tests.quant.moe_reference import routed

    layout = QuantExpertFormat(256, 256, "Q4_K", "Q4_K", "Q6_K")
    table, _ = random_experts(layout, 4, seed=2)
    ids, weights = routed(2, 4, top_k=2, seed=3)
    x = (torch.randn(2, 256, generator=torch.Generator().manual_seed(4)) * 0.05).to(torch.bfloat16)
    w = weights.to(torch.bfloat16)
    expected = layout.gathered(x, table, ids.reshape(-1), w)  # the CPU path: torch ops on the reference
    monkeypatch.setattr(linear, "uses_triton", lambda device: True)  # the CUDA path, run by the interpreter
    monkeypatch.setattr(linear, "GEMV", "word")  # the word kernels, not the wide ones
    monkeypatch.setattr(linear, "word_split", lambda spec: (2, 1, 1))  # through the word kernels at this shape
    got = layout.gathered(x, table, ids.reshape(-1), w)
    assert got.shape == expected.shape and got.dtype == torch.bfloat16
    close(got, expected, rtol=2**-6)


def test_quant_gemv_of_a_dense_matrix(monkeypatch):
    import engine.quant.linear as linear

    spec, table = table_of(Q6_K, 512, num_slots=1)
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(6))
    expected = linear.quant_gemv(x, table[0], spec)  # the CPU path: the reference
    monkeypatch.setattr(linear, "uses_triton", lambda device: True)  # the CUDA path, run by the interpreter
    close(linear.quant_gemv(x, table[0], spec), expected)
