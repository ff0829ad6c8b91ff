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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_grouped_rows_are_summed_as_combine_grouped_sums_them(monkeypatch, dtype):
    """A large step's outputs grouped by expert, read in place through each entry's row (dispatch.position)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(7)
    tokens, top_k, hidden = 5, 4, 300
    ids = torch.stack([torch.randperm(16, generator=generator)[:top_k] for _ in range(tokens)])
    plan = dispatch.plan_dispatch(ids.numpy(), torch.ones(tokens, top_k))
    out = (torch.randn(tokens * top_k, hidden, generator=generator) * 10).to(dtype)
    expected = dispatch.combine_grouped(out, plan, ids)  # CPU tensors: the torch adds
    assert torch.equal(ranked_sum(out, ids, plan.position), expected)


def test_a_device_plan_lists_the_host_plans_entries():
    """plan_on_device (no host sync) groups the entries in the host plan's order, with every expert id's bounds."""
    generator = torch.Generator().manual_seed(3)
    ids = torch.stack([torch.randperm(10, generator=generator)[:3] for _ in range(40)])
    weights = torch.rand(40, 3, generator=generator)
    host, device = dispatch.plan_dispatch(ids.numpy(), weights), dispatch.plan_on_device(ids, weights, 12)
    assert torch.equal(device.tokens, host.tokens) and torch.equal(device.position, host.position)
    assert torch.equal(device.weights, host.weights)
    bounds = device.expert_bounds.tolist()
    assert len(bounds) == 13 and bounds[-1] == 120
    for u, expert in enumerate(host.experts):
        assert bounds[expert : expert + 2] == host.bounds[u : u + 2].tolist()
