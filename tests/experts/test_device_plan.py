"""The device plan's counting sort (engine.experts.routing.device_plan, Triton's interpreter on the CPU) gives the
stable sort's plan entry for entry, and the row tiles device_plan.tile_table lists from the same bounds."""

import numpy as np
import pytest
import torch

pytest.importorskip("triton")

from engine.experts.routing import dispatch  # noqa: E402
from engine.quant import grouped_gemm  # noqa: E402


def routed(tokens: int, top_k: int, experts: int, seed: int, skew: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    if skew:  # most entries on a few experts, some experts unused
        pool = torch.randperm(experts, generator=generator)[: max(top_k, experts // 8)]
        ids = torch.stack([pool[torch.randperm(pool.numel(), generator=generator)[:top_k]] for _ in range(tokens)])
    else:
        ids = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(tokens)])
    return ids, torch.rand(tokens, top_k, generator=generator, dtype=torch.float32).to(torch.bfloat16)


CASES = [(40, 3, 12, False), (1, 8, 128, False), (17, 2, 32, True), (513, 8, 128, False), (300, 8, 128, True),
         (90, 4, 129, False), (64, 10, 512, True)]


@pytest.mark.parametrize("tokens,top_k,experts,skew", CASES)
def test_the_counting_sort_gives_the_stable_sorts_plan(monkeypatch, tokens, top_k, experts, skew):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ids, weights = routed(tokens, top_k, experts, seed=tokens + experts, skew=skew)
    with monkeypatch.context() as torch_sort:
        torch_sort.setattr(dispatch, "runs_plan_kernels", lambda ids: False)
        torch_plan = dispatch.plan_on_device(ids, weights, experts)
    assert torch_plan.tiles is None
    for bm in (None, 16, 128):
        plan = dispatch.plan_on_device(ids, weights, experts, tile_rows=bm)
        assert torch.equal(plan.tokens, torch_plan.tokens)
        assert torch.equal(plan.position, torch_plan.position) and plan.position.dtype == torch.int64
        assert torch.equal(plan.weights, torch_plan.weights) and plan.weights.dtype == weights.dtype
        assert torch.equal(plan.expert_bounds, torch_plan.expert_bounds)
        if bm is None:
            assert plan.tiles is None
            continue
        expected = grouped_gemm.device_row_tiles(torch_plan, bm)  # the tile table's own kernel
        assert plan.tile_rows == bm and torch.equal(grouped_gemm.device_row_tiles(plan, bm), expected)
        assert grouped_gemm.device_row_tiles(plan, bm) is plan.tiles
        assert grouped_gemm.device_row_tiles(plan, bm * 2) is not plan.tiles  # another size: listed afresh


def test_the_plan_matches_the_host_plan(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ids, weights = routed(200, 8, 128, seed=5)
    host, device = dispatch.plan_dispatch(ids.numpy(), weights), dispatch.plan_on_device(ids, weights, 128, 64)
    assert torch.equal(device.tokens, host.tokens) and torch.equal(device.position, host.position)
    assert torch.equal(device.weights, host.weights)
    bounds = device.expert_bounds.numpy()
    assert np.array_equal(bounds[host.experts], host.bounds[:-1]) and bounds[-1] == 1600
    expected = grouped_gemm.row_tiles(host, np.arange(host.experts.size), host.experts, "cpu", 64)
    assert torch.equal(device.tiles[: expected.shape[0]], expected)
    assert not device.tiles[expected.shape[0]:].any()


def test_without_the_interpreter_the_cpu_plans_with_torch(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ids, _ = routed(4, 2, 8, seed=1)
    assert not dispatch.runs_plan_kernels(ids)
