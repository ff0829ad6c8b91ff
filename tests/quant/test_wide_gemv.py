"""engine.quant.wide_gemv's wide-load GEMV on tiny shapes in Triton's interpreter (CPU): within fp32 rounding of
the reference GEMV, exactly batch invariant, its SwiGLU and routing-weight epilogues as the torch ops round them,
and the linear functions routing Q4_K, Q5_K and Q6_K matrices to it."""

from __future__ import annotations

import os

import pytest
import torch

from engine.quant.linear import (QuantLinearSpec, gathered_gemv_reference, glu_input, wide_gemv_triton,
                                 wide_split)
from engine.quant.types import Q4_K, Q5_K, Q6_K, Q8_0
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import random_matrix

pytestmark = pytest.mark.skipif(not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")
OFFSET = 32


def table_of(qtype, in_features, out=12, num_slots=3):
    spec = QuantLinearSpec(qtype, out, in_features, OFFSET)
    table = torch.zeros(num_slots, spec.end + 16, dtype=torch.uint8)
    for s in range(num_slots):
        table[s, OFFSET : spec.end] = torch.from_numpy(random_matrix(qtype, out, in_features, seed=s).reshape(-1))
    return spec, table


def close(got, expected, rtol=1e-5):
    scale = expected.float().abs().max().item()
    torch.testing.assert_close(got.float(), expected.float(), rtol=rtol, atol=rtol * scale)


# In the slow step: float16, whose activations load as float32's do, one element each (bfloat16's unpack from words),
# and Q5_K, which takes the wide GEMV only through WIDE_SPLITS (test_wide_split_serves_q4_k_and_q6_k_at_aligned_offsets)
@pytest.mark.parametrize("qtype", [Q4_K, pytest.param(Q5_K, marks=pytest.mark.slow), Q6_K], ids=lambda t: t.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, pytest.param(torch.float16, marks=pytest.mark.slow)],
                         ids=str)
def test_wide_gemv_matches_reference(qtype, dtype):
    spec, table = table_of(qtype, 768)  # three super-blocks: a step of two or four masks one
    rows = torch.tensor([2, 0, 2, 1])
    x = torch.randn(2, 768, generator=torch.Generator().manual_seed(qtype.ggml_id)).to(dtype)
    got = wide_gemv_triton(x, table, rows, spec, x_div=2, split=(4, 2, 1))
    rtol = 1e-5 if dtype == torch.float32 else 2**-7
    close(got, gathered_gemv_reference(x, table, rows, spec, x_div=2), rtol)
    for split in ((8, 4, 1), (2, 8, 1), (4, 4, 2)):  # other splits: the same values within fp32 rounding
        close(wide_gemv_triton(x, table, rows, spec, x_div=2, split=split), got, rtol)
    one = wide_gemv_triton(x[1:], table, rows[3:], spec, split=(4, 2, 1))
    assert torch.equal(one, got[3:])  # entry 3 alone: the same bits


@pytest.mark.parametrize("qtype", [Q4_K, Q6_K], ids=lambda t: t.name)
def test_wide_gemv_swiglu_and_scale_epilogues(qtype):
    spec, table = table_of(qtype, 256)
    rows = torch.tensor([1, 2, 0])
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    gate_up = wide_gemv_triton(x, table, rows, spec)
    h = wide_gemv_triton(x, table, rows, spec, swiglu=True)
    assert h.shape == (3, 6) and h.dtype == torch.bfloat16
    # silu's exp differs in the last bits between Triton and torch, which can move h by one bf16 step
    close(h, glu_input(gate_up), rtol=2**-7)
    close(wide_gemv_triton(x, table, rows, spec, swiglu=True, split=(2, 2, 1)), h, rtol=2**-7)  # a gate, an up row
    w = torch.tensor([0.25, 0.5, 0.75], dtype=torch.bfloat16)
    scaled = wide_gemv_triton(x, table, rows, spec, scale=w)
    assert torch.equal(scaled, (gate_up * w[:, None]).to(torch.bfloat16))


def test_wide_split_serves_q4_k_and_q6_k_at_aligned_offsets(monkeypatch):
    import engine.quant.linear as linear

    monkeypatch.setattr(linear, "GEMV", "wide")
    monkeypatch.setattr(linear, "WIDE_SPLITS", {})
    assert wide_split(QuantLinearSpec(Q4_K, 1536, 2048, 0)) == (2, 8, 1)
    assert wide_split(QuantLinearSpec(Q4_K, 2048, 768, 64)) == (2, 4, 1)
    assert wide_split(QuantLinearSpec(Q6_K, 2048, 768, 0)) == (2, 4, 1)
    assert wide_split(QuantLinearSpec(Q4_K, 16, 256, 8)) is None  # rows off 16-byte boundaries
    assert wide_split(QuantLinearSpec(Q8_0, 16, 256, 0)) is None
    assert wide_split(QuantLinearSpec(Q5_K, 2048, 768, 0)) is None  # not measured: only through the override
    monkeypatch.setattr(linear, "WIDE_SPLITS", {"Q4_K:2048": (4, 8, 1), "Q6_K:768": None, "Q5_K:768": (2, 4, 1)})
    assert wide_split(QuantLinearSpec(Q4_K, 1536, 2048, 0)) == (4, 8, 1)
    assert wide_split(QuantLinearSpec(Q6_K, 2048, 768, 0)) is None
    assert wide_split(QuantLinearSpec(Q5_K, 2048, 768, 0)) == (2, 4, 1)
    monkeypatch.setattr(linear, "GEMV", "word")
    assert wide_split(QuantLinearSpec(Q4_K, 1536, 2048, 0)) is None


@pytest.mark.slow  # ~80 s (interpreted Triton kernels): the README command's budget
def test_expert_format_small_step_through_the_wide_kernel(monkeypatch):
    import engine.quant.linear as linear
    from engine.quant.expert_format import QuantExpertFormat
    from tests.quant.blocks import random_experts
    from tests.quant.moe_reference import routed

    layout = QuantExpertFormat(256, 256, "Q4_K", "Q4_K", "Q4_K")
    table, _ = random_experts(layout, 4, seed=2)
    ids, weights = routed(2, 4, top_k=2, seed=3)
    x = (torch.randn(2, 256, generator=torch.Generator().manual_seed(4)) * 0.05).to(torch.bfloat16)
    w = weights.to(torch.bfloat16)
    expected = layout.gathered(x, table, ids.reshape(-1), w)  # the CPU path: torch ops on the reference
    monkeypatch.setattr(linear, "uses_triton", lambda device: True)  # the CUDA path, run by the interpreter
    monkeypatch.setattr(linear, "GEMV", "wide")
    calls = []
    original = linear.wide_gemv_triton
    monkeypatch.setattr(linear, "wide_gemv_triton", lambda *a, **k: calls.append(k) or original(*a, **k))
    got = layout.gathered(x, table, ids.reshape(-1), w)
    assert len(calls) == 2 and calls[0].get("swiglu") and calls[1].get("scale") is not None
    assert got.shape == expected.shape and got.dtype == torch.bfloat16
    close(got, expected, rtol=2**-6)
