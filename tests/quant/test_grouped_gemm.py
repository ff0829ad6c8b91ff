"""The grouped MoE GEMM of large steps (engine.quant.grouped_gemm) in Triton's interpreter on small shapes, for every
expert format: within rounding of the per-expert path (dequantize, then engine.experts.formats.kernel.run_expert), and
the same bits whichever group an expert runs in and whichever slot row holds it (the pager's chunking)."""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import pytest
import torch

from engine.experts.formats.activation import SILU_GLU, ClampedSwiGlu, ExpertBias
from engine.quant.dense_layout import DenseLayout
from engine.experts.routing.dispatch import (combine_grouped, plan_dispatch, plan_on_device, start_layer,
                                             start_layer_on_device)
from engine.quant import expert_format, grouped_gemm
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.grouped_gemm import MAX_ROWS_PER_EXPERT, row_tiles, runs_grouped
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import random_experts
from tests.quant.moe_reference import FORMATS, routed

pytestmark = pytest.mark.skipif(not HAS_TRITON or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs Triton's interpreter (tests/conftest.py turns it on without CUDA)")
E, TOP_K = 3, 2
TOKENS = 100  # ~67 rows per expert: two 64-row tiles each (the tests of bits and of the tiles)
FEW_TOKENS = 24  # the tests of values
GPT_OSS = ClampedSwiGlu(1.702, 7.0)


@pytest.fixture(autouse=True)
def rows_per_tile(monkeypatch):
    """64-row tiles: an expert's span here covers two (the H200's default is taller, and so slower to interpret)."""
    monkeypatch.setattr(grouped_gemm, "TILES", "64,32,64,8,3")


def quant_layer(types, hidden=256, intermediate=256, activation=SILU_GLU, with_bias=False):
    bias = biases(hidden, intermediate) if with_bias else None
    layout = QuantExpertFormat(hidden, intermediate, *types, activation=activation, bias=bias)
    table, _ = random_experts(layout, E, seed=1)
    return layout, table


def dense_layer(dtype, activation=SILU_GLU, with_bias=False, hidden=256, intermediate=128):
    layout = DenseLayout(hidden, intermediate, dtype, activation)
    layout.bias = biases(hidden, intermediate) if with_bias else None
    g = torch.Generator().manual_seed(2)
    return layout, (torch.randn(E, layout.numel, generator=g) * 0.05).to(dtype)


def biases(hidden: int, intermediate: int) -> ExpertBias:
    g = torch.Generator().manual_seed(9)
    return ExpertBias(gate_up=torch.randn(E, 2 * intermediate, generator=g) * 0.1,
                      down=torch.randn(E, hidden, generator=g) * 0.1)


def cast_bias(layout, dtype):
    bias = layout.bias
    if bias is not None:
        layout.bias = ExpertBias(bias.gate_up.to(dtype), bias.down.to(dtype))


def per_expert(layout, table, x, ids, weights):
    """The reference: engine.experts.formats.kernel's math one expert at a time (the CPU's large-step path)."""
    dispatch, out = start_layer(x, ids.cpu().numpy(), weights)
    for u, expert in enumerate(dispatch.experts):
        layout.run_expert(table[int(expert)], dispatch, u, out)
    return combine_grouped(out, dispatch, ids)


def grouped(layout, table, x, ids, weights, groups=1, moved=False):
    """The grouped kernels over the experts in `groups` interleaved groups; moved: from a reversed table."""
    dispatch, out = start_layer(x, ids.cpu().numpy(), weights)
    units = np.arange(dispatch.experts.size)
    source = table.flip(0).contiguous() if moved else table
    for g in range(groups):
        part = units[g::groups]
        slots = E - 1 - dispatch.experts[part] if moved else dispatch.experts[part]
        grouped_gemm.run_grouped(grouped_spec(layout), source, dispatch, part, slots, out)
    return combine_grouped(out, dispatch, ids)


def grouped_spec(layout):
    if isinstance(layout, DenseLayout):
        return grouped_gemm.GroupedExpert.dense(layout.hidden, layout.intermediate, layout.dtype, layout.activation,
                                                layout.bias)
    return layout.grouped


def inputs(hidden, dtype, seed=0, tokens=TOKENS):
    ids, weights = routed(tokens, E, TOP_K, seed)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(seed)) * 0.5
    return x.to(dtype), ids, weights.to(dtype)


@cache
def whole_step(case: str, seed: int) -> torch.Tensor:
    """grouped() over TOKENS tokens of CASES[case] in bfloat16 at the fixture's tiles, all in one group: the output the
    tests of bits compare against, computed once per process."""
    layout, table = CASES[case]()
    cast_bias(layout, torch.bfloat16)
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=seed)
    return grouped(layout, table, x, ids, weights)


CASES = {  # name: a layer builder
    **{name: (lambda types=types: quant_layer(types)) for name, types in FORMATS.items()},
    "Q6_K": lambda: quant_layer(("Q6_K",) * 3, hidden=512),  # 210-byte blocks: every other one off a word
    "Q8_0-partial-tiles": lambda: quant_layer(("Q8_0",) * 3, hidden=288, intermediate=96),
    # llama.cpp's fallbacks for rows that are not whole super-blocks (a 288 hidden size, 96 intermediate)
    "Q5_0-fallback": lambda: quant_layer(("Q5_0", "Q4_0", "Q5_1"), hidden=288, intermediate=96),
    "IQ4_NL-fallback": lambda: quant_layer(("IQ4_NL", "IQ4_NL", "Q5_1"), hidden=288, intermediate=96),
    "MXFP4-gpt-oss": lambda: quant_layer(("MXFP4",) * 3, hidden=288, intermediate=160, activation=GPT_OSS,
                                         with_bias=True),
    "BF16": lambda: dense_layer(torch.bfloat16),
    "F16": lambda: dense_layer(torch.float16),
    "F32-gpt-oss": lambda: dense_layer(torch.float32, GPT_OSS, with_bias=True),
}


VALUE_CASES = [(case, torch.bfloat16) for case in CASES if not case.startswith("F")]
VALUE_CASES += [("Q4_K_M", torch.float32), ("MXFP4-gpt-oss", torch.float32), ("F16", torch.float16),
                ("F32-gpt-oss", torch.float32)]
# In the slow step: MXFP4-gpt-oss in float32, whose blocks the bfloat16 case reads and whose epilogue F32-gpt-oss
# runs in float32
SLOW_VALUE_CASES = {("MXFP4-gpt-oss", torch.float32)}


@pytest.mark.parametrize("case,dtype", [pytest.param(*case, marks=[pytest.mark.slow] if case in SLOW_VALUE_CASES
                                                     else []) for case in VALUE_CASES],
                         ids=[f"{c}-{str(d)[6:]}" for c, d in VALUE_CASES])
def test_grouped_matches_the_per_expert_path(case, dtype):
    layout, table = CASES[case]()
    cast_bias(layout, dtype)
    x, ids, weights = inputs(layout.hidden, dtype, tokens=FEW_TOKENS)
    expected = per_expert(layout, table, x, ids, weights).float()
    got = grouped(layout, table, x, ids, weights)
    assert got.dtype == x.dtype and torch.isfinite(got.float()).all()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance * expected.abs().max().item())


# MXFP4 in the slow step: which group or slot row an expert runs in is the same tiling code for every format, run
# here for a quantized and a dense one (its values: test_grouped_matches_the_per_expert_path)
@pytest.mark.parametrize("case", ["Q4_K_M", pytest.param("MXFP4-gpt-oss", marks=pytest.mark.slow), "BF16"])
def test_grouped_bits_do_not_depend_on_groups_or_slots(case):
    layout, table = CASES[case]()
    dtype = torch.bfloat16
    cast_bias(layout, dtype)
    x, ids, weights = inputs(layout.hidden, dtype, seed=1)
    whole = whole_step(case, seed=1)
    assert torch.equal(grouped(layout, table, x, ids, weights, groups=2, moved=True), whole)
    assert torch.equal(grouped(layout, table, x, ids, weights, groups=3), whole)


@pytest.mark.parametrize("case,dtype", [("Q4_K_M", torch.bfloat16), ("Q6_K", torch.bfloat16),
                                        pytest.param("Q4_K_M", torch.float32, marks=pytest.mark.slow)],
                         ids=["Q4_K_M-bf16", "Q6_K-bf16", "Q4_K_M-f32"])  # f32: the same tiles, other activations
def test_word_tiles_give_the_byte_tiles_bits(case, dtype, monkeypatch):
    """Q4_K and Q6_K tiles from 32-bit loads (grouped_tiles) dequantize to the same values as one byte an element."""
    layout, table = CASES[case]()
    x, ids, weights = inputs(layout.hidden, dtype, seed=4, tokens=FEW_TOKENS)
    words = grouped(layout, table, x, ids, weights)
    monkeypatch.setattr(grouped_gemm, "WORD_TILES", False)
    assert torch.equal(grouped(layout, table, x, ids, weights), words)


def test_word_tiles_need_word_aligned_rows():
    layout, table = CASES["Q4_K_M"]()
    spec = layout.grouped
    assert grouped_gemm.word_aligned(table, spec.gate, spec.up, spec.down)
    shifted = torch.zeros(table.numel() + 4, dtype=torch.uint8)[2 : 2 + table.numel()].view(table.shape)
    assert not grouped_gemm.word_aligned(shifted, spec.gate, spec.up, spec.down)


def test_a_tokens_bits_do_not_depend_on_the_other_tokens():
    layout, table = CASES["Q4_K_M"]()
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=1)
    whole = whole_step("Q4_K_M", seed=1)
    for t in (0, 57):
        alone = grouped(layout, table, x[t : t + 1], ids[t : t + 1], weights[t : t + 1])
        assert torch.equal(alone, whole[t : t + 1])


def test_row_tiles_cover_each_experts_span_once():
    ids = torch.tensor([[0, 2]] * 70 + [[2, 1]] * 5)
    dispatch = plan_dispatch(ids.numpy(), torch.ones(75, 2))
    tiles = row_tiles(dispatch, np.array([2, 0]), np.array([7, 4]), "cpu", 64)
    # rows: expert 0 owns 0..69, expert 1 70..74, expert 2 75..149; units 2 and 0 sit in slots 7 and 4
    assert tiles.tolist() == [[7, 2, 75, 150], [7, 2, 75 + 64, 150], [4, 0, 0, 70], [4, 0, 64, 70]]


def test_layouts_take_the_grouped_path_where_it_runs(monkeypatch):
    layout, table = CASES["Q4_K_M"]()
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=1)
    monkeypatch.setattr(expert_format, "runs_grouped", lambda *args: True)
    assert torch.equal(layout.run_blocks(x, ids, weights, table), whole_step("Q4_K_M", seed=1))


def test_long_prompts_run_expert_by_expert():
    """Past MAX_ROWS_PER_EXPERT rows per expert each expert's own GEMM is faster; the step's routing decides."""
    cuda = torch.device("cuda")  # only its type is read

    def dispatch(rows: int):
        ids = np.array([[0, 1]] * rows)  # every row uses experts 0 and 1
        return plan_dispatch(ids, torch.ones(rows, 2))

    assert runs_grouped(cuda, SILU_GLU, dispatch(MAX_ROWS_PER_EXPERT))
    assert not runs_grouped(cuda, SILU_GLU, dispatch(MAX_ROWS_PER_EXPERT + 1))
    assert not runs_grouped(torch.device("cpu"), SILU_GLU, dispatch(4))


def test_a_tile_configuration_is_five_to_seven_integers(monkeypatch):
    monkeypatch.setattr(grouped_gemm, "TILES", "128,32,64,8,3")
    assert grouped_gemm.configuration() == (128, 32, 64, 8, 3, 3, 0)  # both kernels' stages, not swapped
    monkeypatch.setattr(grouped_gemm, "TILES", "128,32,64,8,3,1")
    assert grouped_gemm.configuration(4096) == (128, 32, 64, 8, 3, 1, 0)
    monkeypatch.setattr(grouped_gemm, "TILES", "32,64,64,4,3,3,1")
    assert grouped_gemm.configuration() == (32, 64, 64, 4, 3, 3, 1)
    monkeypatch.setattr(grouped_gemm, "TILES", "128,32")
    with pytest.raises(ValueError, match="BM,BN_GATE_UP,BN_DOWN,NUM_WARPS,NUM_STAGES"):
        grouped_gemm.configuration()


def test_the_configuration_follows_the_steps_entries_alone(monkeypatch):
    """Without TILES a step takes the first PROMPT_TILES entry whose bound holds its grouped entries,
    else the module's tiles: one choice per step size, whichever provider runs it."""
    monkeypatch.setattr(grouped_gemm, "TILES", None)
    small, middle = (32, 64, 64, 4, 3, 3, 1), (64, 64, 128, 8, 3, 3, 1)
    monkeypatch.setattr(grouped_gemm, "PROMPT_TILES", ((4096, small), (16384, middle)))
    assert grouped_gemm.configuration(100) == small and grouped_gemm.configuration(4096) == small
    assert grouped_gemm.configuration(4097) == middle
    default = (grouped_gemm.BM, grouped_gemm.BN_GATE_UP, grouped_gemm.BN_DOWN, grouped_gemm.NUM_WARPS,
               grouped_gemm.NUM_STAGES, grouped_gemm.DOWN_STAGES, 0)
    assert grouped_gemm.configuration(16385) == default and grouped_gemm.configuration() == default


SWAPPED = "32,64,64,4,3,3,1"  # tokens on the tensor cores' N side (grouped_kernels.mma)


@pytest.mark.parametrize("case,dtype", [("Q4_K_M", torch.bfloat16), ("Q6_K", torch.bfloat16),
                                        ("MXFP4-gpt-oss", torch.bfloat16), ("Q8_0-partial-tiles", torch.bfloat16),
                                        ("BF16", torch.bfloat16), ("Q4_K_M", torch.float32),
                                        ("F32-gpt-oss", torch.float32)],
                         ids=["Q4_K_M-bf16", "Q6_K-bf16", "MXFP4-gpt-oss-bf16", "Q8_0-partial", "BF16", "Q4_K_M-f32",
                              "F32-gpt-oss"])
def test_swapped_tiles_match_the_per_expert_path(case, dtype, monkeypatch):
    monkeypatch.setattr(grouped_gemm, "TILES", SWAPPED)
    layout, table = CASES[case]()
    cast_bias(layout, dtype)
    x, ids, weights = inputs(layout.hidden, dtype, tokens=FEW_TOKENS)
    expected = per_expert(layout, table, x, ids, weights).float()
    got = grouped(layout, table, x, ids, weights)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance * expected.abs().max().item())


# BF16 in the slow step: its swapped tiles' values are test_swapped_tiles_match_the_per_expert_path's, and the
# tiling and the device plan are Q4_K_M's code
@pytest.mark.parametrize("case", ["Q4_K_M", pytest.param("BF16", marks=pytest.mark.slow)])
def test_swapped_tiles_bits_do_not_depend_on_groups_slots_or_the_plan(case, monkeypatch):
    monkeypatch.setattr(grouped_gemm, "TILES", SWAPPED)
    layout, table = CASES[case]()
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=1)
    whole = grouped(layout, table, x, ids, weights)
    assert torch.equal(grouped(layout, table, x, ids, weights, groups=2, moved=True), whole)
    dispatch, out = start_layer_on_device(x, ids, weights, E)
    grouped_gemm.run_grouped_table(grouped_spec(layout), table, dispatch, out)
    assert torch.equal(combine_grouped(out, dispatch, ids), whole)


def test_tiles_too_large_for_the_gpu_fall_back_to_small_ones(monkeypatch):
    """A GPU whose shared memory cannot hold the configured tiles even in one stage runs SMALL_TILES."""
    from triton.runtime.errors import OutOfResources

    layout, table = CASES["Q4_K_M"]()
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=5, tokens=FEW_TOKENS)
    small = grouped(layout, table, x, ids, weights)  # the fixture's 64-row configuration is SMALL_TILES
    assert grouped_gemm.configuration() == grouped_gemm.SMALL_TILES
    monkeypatch.setattr(grouped_gemm, "TILES", "128,32,64,8,3")
    launch, sizes = grouped_gemm.launch, []

    def small_gpu(kernel, grid, *args, **options):
        sizes.append(options["BM"])
        if options["BM"] > 64:
            raise OutOfResources(262144, 101376, "shared memory")
        return launch(kernel, grid, *args, **options)

    monkeypatch.setattr(grouped_gemm, "launch", small_gpu)
    assert torch.equal(grouped(layout, table, x, ids, weights), small)
    assert sizes == [128, 64, 64]


def test_device_row_tiles_list_the_host_tiles_then_empty_ones():
    """The tile table planned on the device (one Triton program) lists every expert's tiles as row_tiles does for
    the experts at their own rows, then empty entries up to the most tiles the step's rows can take."""
    ids = torch.tensor([[0, 2]] * 70 + [[2, 1]] * 5 + [[4, 0]] * 3)  # expert 3 unused
    weights = torch.ones(78, 2)
    host = plan_dispatch(ids.numpy(), weights)
    device = plan_on_device(ids, weights, num_experts=5)
    for bm in (16, 64):
        expected = row_tiles(host, np.arange(host.experts.size), host.experts, "cpu", bm).tolist()
        tiles = grouped_gemm.device_row_tiles(device, bm).tolist()
        assert len(tiles) == -(-156 // bm) + 5
        assert tiles[: len(expected)] == expected
        assert all(entry == [0, 0, 0, 0] for entry in tiles[len(expected) :])


@pytest.mark.slow  # the default run plans on the device in the swapped tiles' test and checks the tile table alone
@pytest.mark.parametrize("case", ["Q4_K_M", "BF16"])
def test_a_device_planned_step_gives_the_host_planned_bits(case):
    """Every expert from its row of the table, planned on the device (no host sync), as the pager's host plan."""
    layout, table = CASES[case]()
    x, ids, weights = inputs(layout.hidden, torch.bfloat16, seed=6)
    dispatch, out = start_layer_on_device(x, ids, weights, E)
    grouped_gemm.run_grouped_table(grouped_spec(layout), table, dispatch, out)
    assert torch.equal(combine_grouped(out, dispatch, ids), grouped(layout, table, x, ids, weights))


def test_a_launch_that_does_not_fit_takes_fewer_stages_once(monkeypatch):
    """Stages that outgrow shared memory come off one at a time, and what fits is remembered: a caught launch error
    keeps the launch's tensors alive through its traceback, so it must not happen on every launch."""
    from triton.runtime.errors import OutOfResources

    asked = []

    class Kernel:
        def __getitem__(self, grid):
            def run(*args, **options):
                asked.append(options["num_stages"])
                if options["num_stages"] > 2 or options["BM"] > 128:
                    raise OutOfResources(262144, 232448, "shared memory")
                return "launched"
            return run

    monkeypatch.setattr(grouped_gemm, "FITTED", {})
    kernel = Kernel()
    assert grouped_gemm.launch(kernel, (1,), BM=128, num_stages=3) == "launched"
    assert grouped_gemm.launch(kernel, (1,), BM=128, num_stages=3) == "launched"
    assert asked == [3, 2, 2]
    asked.clear()
    for _ in range(2):  # nothing fits (a consumer card): tried once, then refused without launching
        with pytest.raises(OutOfResources):
            grouped_gemm.launch(kernel, (1,), BM=256, num_stages=3)
    assert asked == [3, 2, 1]
