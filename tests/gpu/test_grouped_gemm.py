"""The grouped MoE GEMM on the H200: `pytest -m gpu tests/gpu/test_grouped_gemm.py`. Every expert format within
rounding of the per-expert path (what large steps ran before), the same bits in any grouping of the experts and
from any slot rows, and a token's bits independent of the other tokens of the step."""

from __future__ import annotations


import pytest
import torch

from engine.quant.dense_layout import DenseLayout
from engine.experts.routing.dispatch import combine_grouped, start_layer
from engine.quant.grouped_gemm import runs_grouped
from tests.quant import test_grouped_gemm as cases

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def on(device, layout, table):
    if layout.bias is not None:
        layout.bias = type(layout.bias)(layout.bias.gate_up.to(device), layout.bias.down.to(device))
    return layout, table.to(device)


def per_expert_on_cuda(layout, table, x, ids, weights):
    """The per-expert path (each expert's own GEMMs), called directly: the reference for the grouped kernels."""
    dispatch, out = start_layer(x, ids.cpu().numpy(), weights)
    for u, expert in enumerate(dispatch.experts):
        layout.run_expert(table[int(expert)], dispatch, u, out)
    return combine_grouped(out, dispatch, ids)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", list(cases.CASES))
def test_grouped_matches_the_per_expert_path(cuda, case, dtype, monkeypatch):
    layout, table = on(cuda, *cases.CASES[case]())
    if isinstance(layout, DenseLayout):
        if layout.dtype != dtype and layout.dtype != torch.bfloat16:
            pytest.skip("dense blocks compute in their own dtype")
        dtype = layout.dtype
    cases.cast_bias(layout, dtype)
    x, ids, weights = (t.to(cuda) for t in cases.inputs(layout.hidden, dtype))
    assert runs_grouped(cuda, layout.activation)
    got = layout.run_blocks(x, ids, weights, table)
    expected = per_expert_on_cuda(layout, table, x, ids, weights).float()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance * expected.abs().max().item())
    assert torch.equal(layout.run_blocks(x, ids, weights, table), got)  # repeatable


@pytest.mark.parametrize("case", ["Q4_K_M", "MXFP4-gpt-oss", "BF16"])
def test_grouped_bits_do_not_depend_on_groups_slots_or_other_tokens(cuda, case):
    layout, table = on(cuda, *cases.CASES[case]())
    cases.cast_bias(layout, torch.bfloat16)
    x, ids, weights = (t.to(cuda) for t in cases.inputs(layout.hidden, torch.bfloat16, seed=1))
    whole = cases.grouped(layout, table, x, ids, weights)
    assert torch.equal(cases.grouped(layout, table, x, ids, weights, groups=2, moved=True), whole)
    assert torch.equal(cases.grouped(layout, table, x, ids, weights, groups=3), whole)
    for t in (0, 57):
        alone = cases.grouped(layout, table, x[t : t + 1], ids[t : t + 1], weights[t : t + 1])
        assert torch.equal(alone, whole[t : t + 1])


@pytest.mark.parametrize("case", ["Q4_K_M", "Q6_K"])
def test_word_tiles_give_the_byte_tiles_bits(cuda, case, monkeypatch):
    from engine.quant import grouped_gemm

    layout, table = on(cuda, *cases.CASES[case]())
    x, ids, weights = (t.to(cuda) for t in cases.inputs(layout.hidden, torch.bfloat16, seed=4))
    words = cases.grouped(layout, table, x, ids, weights)
    monkeypatch.setattr(grouped_gemm, "WORD_TILES", False)
    assert torch.equal(cases.grouped(layout, table, x, ids, weights), words)


@pytest.mark.parametrize("case", ["Q4_K_M", "Q6_K", "BF16"])
def test_a_device_planned_step_gives_the_host_planned_bits(cuda, case):
    """Resident layers plan their large steps on the device (no host sync): the bits of the pager's host plan."""
    layout, table = on(cuda, *cases.CASES[case]())
    x, ids, weights = (t.to(cuda) for t in cases.inputs(layout.hidden, torch.bfloat16, seed=6))
    assert torch.equal(layout.run_blocks(x, ids, weights, table), cases.grouped(layout, table, x, ids, weights))


def test_launches_that_outgrow_shared_memory_leave_no_garbage(cuda, monkeypatch):
    """The down kernel's three stages of 128-row tiles do not fit the H200's shared memory and run with fewer: after
    the first step no launch fails again, so nothing stays alive waiting for a garbage collection."""
    import gc

    from engine.quant import grouped_gemm

    monkeypatch.setattr(grouped_gemm, "TILES", "128,32,64,8,3")  # no DOWN_STAGES: the down kernel asks for three
    layout, table = on(cuda, *cases.CASES["Q4_K_M"]())
    x, ids, weights = (t.to(cuda) for t in cases.inputs(layout.hidden, torch.bfloat16, seed=7))
    layout.run_blocks(x, ids, weights, table)  # the first launch finds the stages that fit
    gc.collect()
    gc.disable()
    try:
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated(cuda)
        for _ in range(3):
            layout.run_blocks(x, ids, weights, table)
            cases.grouped(layout, table, x, ids, weights)
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated(cuda) == held
    finally:
        gc.enable()
