"""A softmax router's selection as one kernel (engine.experts.routing.fused_router), in Triton's interpreter on the
CPU, against the torch ops it replaces (dispatch.route, transformer.routed_weights): the same ids, the weights
within the rounding of their sums, ties broken towards the lower expert id."""

from __future__ import annotations

import pytest
import torch

from engine.experts.routing import dispatch

pytest.importorskip("triton", reason="the fused kernels need Triton")  # installed by the test extra
from engine.experts.routing.fused_router import fused_route  # noqa: E402


def reference_weights(logits, ids, normalize, dtype):
    weights = torch.softmax(logits, dim=-1, dtype=torch.float32).gather(1, ids)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(dtype)


def tolerance(dtype):
    return {"atol": 0, "rtol": 2**-7} if dtype == torch.bfloat16 else {"atol": 1e-7, "rtol": 1e-5}


@pytest.mark.parametrize("experts,top_k", [(128, 8), (60, 4), (8, 2), (1000, 8)])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("weights_fp32", [True, False])
def test_top_k_and_weights_as_the_torch_ops(monkeypatch, experts, top_k, normalize, weights_fp32):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(experts + top_k)
    # distinct values (no ties): multiples of 1/16 in [-4, 4) are bf16 values; 1000 experts' logits in fp32
    dtype, step = (torch.bfloat16, 1 / 16) if experts <= 128 else (torch.float32, 1 / 128)
    logits = torch.stack([torch.randperm(experts, generator=generator) * step - 4 for _ in range(3)]).to(dtype)
    expected_ids, expected = dispatch.route(logits, top_k, normalize, weights_fp32)
    ids, weights = fused_route(logits, top_k, normalize, torch.float32 if weights_fp32 else dtype)
    assert ids.dtype == torch.long and torch.equal(ids, expected_ids)
    assert weights.dtype == expected.dtype
    torch.testing.assert_close(weights, expected, **tolerance(weights.dtype))


@pytest.mark.parametrize("normalize", [True, False])
def test_weights_of_given_ids_read_through_a_row_stride(monkeypatch, normalize):
    """Trace-driven routing hands one layer's column of a [T, L, K] table: rows K * L apart."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 128, generator=generator).to(torch.bfloat16)
    table = torch.stack([torch.randperm(128, generator=generator)[:24].view(3, 8) for _ in range(4)])  # [T, L, K]
    ids = table[:, 1]
    assert not ids.is_contiguous()
    out_ids, weights = fused_route(logits, 8, normalize, torch.bfloat16, ids)
    assert out_ids is ids
    torch.testing.assert_close(weights, reference_weights(logits, ids, normalize, torch.bfloat16), atol=0, rtol=2**-7)


def test_ties_go_to_the_lower_expert_id(monkeypatch):
    """Equal probabilities: the lower ids are selected at the k-th value (as CUDA's torch.topk selects them) and
    listed first among equals."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    logits = torch.zeros(2, 16)
    logits[0, [3, 9, 12]] = 1.0  # three equal maxima, then 13 equal values
    logits[1, [14, 2]] = 2.0
    ids, weights = fused_route(logits, 4, False, torch.float32)
    assert ids.tolist() == [[3, 9, 12, 0], [2, 14, 0, 1]]
    assert torch.equal(weights[:, :3].sort(dim=1, descending=True).values, weights[:, :3])
    torch_ids, torch_weights = dispatch.route(logits, 4, False, True)
    for row in range(2):  # the same selected values as torch.topk, whichever tied ids torch lists
        torch.testing.assert_close(weights[row], torch_weights[row], atol=1e-7, rtol=1e-6)
