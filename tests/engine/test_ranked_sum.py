"""The decode step's expert sum as one kernel (engine.experts.routing.ranked_sum), in Triton's interpreter on the CPU:
the same bits as combine()'s torch adds in ascending expert-id order, in every dtype the experts run in."""

from __future__ import annotations

import pytest
import torch

from engine.experts.routing import dispatch
from engine.experts.routing.ranked_sum import ranked_sum


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("top_k", [1, 2, 3, 8])
def test_kernel_adds_in_expert_order_with_the_same_bits(monkeypatch, dtype, top_k):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(top_k)
    tokens, hidden = 3, 1100  # two column blocks, the second partial
    out = (torch.randn(tokens, top_k, hidden, generator=generator) * 10).to(dtype)
    ids = torch.stack([torch.randperm(128, generator=generator)[:top_k] for _ in range(tokens)])  # distinct, unsorted
    expected = dispatch.combine(out, ids)  # CPU tensors: the torch adds
    assert torch.equal(ranked_sum(out, ids), expected)
    if top_k > 2:  # the rows in stored order give other bits (two adds commute), so the test sees the order
        assert not torch.equal(dispatch.sum_ranked(out), expected)
