"""The CPU's small-step expert path (engine.experts.formats.kernel.entry_experts): each (token, k) entry runs its
two projections as one-row GEMMs of its own, reading its block where it lies. A row's bits do not depend on the
other rows of the step (a decode row alone, in a batch, or as one position of a verify step), reading the rows of a
table in place gives the bits of a gathered buffer of them (resident vs paged), and the values are the batched
GEMVs' (the CUDA path)."""

from __future__ import annotations

import pytest
import torch

from engine.experts.formats import kernel
from engine.experts.formats.activation import GELU_TANH_GLU, SILU_GLU, ExpertBias
from engine.experts.routing.dispatch import combine, is_small_step
from engine.quant.dense_layout import DenseLayout

TOKENS, TOP_K, EXPERTS, HIDDEN, INTERMEDIATE = 9, 4, 16, 64, 32


def step(dtype=torch.float32, tokens=TOKENS, seed=0):
    generator = torch.Generator().manual_seed(seed)
    blocks = (torch.randn(EXPERTS, 3 * HIDDEN * INTERMEDIATE, generator=generator) / 8).to(dtype)
    x = torch.randn(tokens, HIDDEN, generator=generator).to(dtype)
    ids = torch.stack([torch.randperm(EXPERTS, generator=generator)[:TOP_K] for _ in range(tokens)])
    weights = torch.rand(tokens, TOP_K, generator=generator)
    return blocks, x, ids, weights


def layouts(dtype):
    plain = DenseLayout(HIDDEN, INTERMEDIATE, dtype)
    bias = ExpertBias(gate_up=torch.randn(EXPERTS, 2 * INTERMEDIATE).to(dtype),
                      down=torch.randn(EXPERTS, HIDDEN).to(dtype))
    biased = DenseLayout(HIDDEN, INTERMEDIATE, dtype, activation=GELU_TANH_GLU, biases={0: bias}).for_layer(0)
    return {"swiglu": plain, "gelu-with-biases": biased}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["swiglu", "gelu-with-biases"])
def test_a_row_has_the_same_bits_alone_in_a_batch_and_beside_other_positions(dtype, kind):
    blocks, x, ids, weights = step(dtype)
    layout = layouts(dtype)[kind]
    assert is_small_step(TOKENS, TOP_K, layout.expert_bytes) and layout.runs_entries(x)  # the path under test
    whole = layout.run_blocks(x, ids, weights, blocks)
    for t in range(TOKENS):
        alone = layout.run_blocks(x[t : t + 1], ids[t : t + 1], weights[t : t + 1], blocks)
        assert torch.equal(alone[0], whole[t]), t
    reordered = torch.randperm(TOKENS, generator=torch.Generator().manual_seed(1))
    shuffled = layout.run_blocks(x[reordered], ids[reordered], weights[reordered], blocks)
    assert torch.equal(shuffled, whole[reordered])


@pytest.mark.parametrize("kind", ["swiglu", "gelu-with-biases"])
def test_rows_read_in_place_give_the_bits_of_a_gathered_buffer(kind):
    """What resident layers (rows of the layer's table) and the pager (slots, or a buffer of gathered blocks)
    compute: the same bits."""
    blocks, x, ids, weights = step()
    layout = layouts(torch.float32)[kind]
    slots = torch.randperm(EXPERTS, generator=torch.Generator().manual_seed(2))  # expert e sits in slot slots[e]
    table = torch.empty_like(blocks)
    table[slots] = blocks
    rows = slots[ids.reshape(-1)]
    in_place = layout.run_rows(x, table, rows, ids, weights)
    gathered = combine(layout.run_gathered(x, table[rows], weights, ids), ids)
    assert torch.equal(in_place, gathered)
    assert torch.equal(in_place, layout.run_blocks(x, ids, weights, blocks))


@pytest.mark.parametrize("kind", ["swiglu", "gelu-with-biases"])
def test_the_values_are_the_batched_gemvs(kind):
    blocks, x, ids, weights = step()
    layout = layouts(torch.float32)[kind]
    gathered = blocks[ids.reshape(-1)]
    expected = kernel.gathered_experts(x, gathered, weights, HIDDEN, INTERMEDIATE, layout.activation, layout.bias, ids)
    got = kernel.entry_experts(x, gathered, weights, HIDDEN, INTERMEDIATE, layout.activation, layout.bias, ids)
    assert got.shape == (TOKENS, TOP_K, HIDDEN)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_entries_run_expert_by_expert():
    ids = torch.tensor([[3, 1], [1, 0], [3, 2]])
    assert kernel.entry_order(ids, 6) == [3, 1, 2, 5, 0, 4]
    assert kernel.entry_order(None, 3) == [0, 1, 2]


def test_the_cpu_small_step_reads_no_gathered_copy(monkeypatch):
    """Resident layers on the CPU: each entry reads its expert's row of the layer's table in place (the gathered
    copy of every entry's block costs as much as the GEMVs on the CPU)."""
    blocks, x, ids, weights = step()
    layout = DenseLayout(HIDDEN, INTERMEDIATE, torch.float32, activation=SILU_GLU)
    seen = []
    entry = kernel.entry_experts
    monkeypatch.setattr(kernel, "entry_experts", lambda x, b, *a, **k: seen.append(b) or entry(x, b, *a, **k))
    layout.run_blocks(x, ids, weights, blocks)
    assert len(seen) == 1 and len(seen[0]) == TOKENS * TOP_K
    for entry_block, expert in zip(seen[0], ids.reshape(-1).tolist()):
        assert entry_block.data_ptr() == blocks[expert].data_ptr()  # a view of the table's row, not a copy


def test_rows_that_would_not_start_on_64_bytes_take_the_gathered_path():
    x = torch.zeros(1, HIDDEN, dtype=torch.bfloat16)
    assert DenseLayout(HIDDEN, INTERMEDIATE, torch.bfloat16).runs_entries(x)
    assert not DenseLayout(HIDDEN, 24, torch.bfloat16).runs_entries(x)  # 48-byte activation rows
    assert not DenseLayout(40, INTERMEDIATE, torch.float32).runs_entries(x.float()[:, :40])  # 160-byte token rows
