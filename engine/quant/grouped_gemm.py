"""The grouped MoE GEMM of large steps: a group of experts of one layer-step in two launches (gate_up with the
activation, then down with the routing weight), reading each expert's weights from its row of a slot table in
the row's own types (engine.quant.grouped_kernels). Every provider passes its own table (resident blocks, a
layer copied whole, the pager's slot pool) and the row of each expert in it, so one kernel serves them all.

The (token, k) entries come grouped by expert as engine.experts.routing.dispatch plans them; each expert's span is cut
into tiles of BM rows. A tile's result depends only on its rows and its expert's weights, never on the tiles
beside it: computing a layer's experts all at once (resident) or group by group as the pager fetches them gives
the same bits. The tile shapes are fixed (never chosen by the step's size) for the same reason.

Shapes: M grouped entries (T*K), D hidden size, I expert intermediate size, U experts of the group."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from engine.experts.formats.activation import SILU_GLU, ClampedSwiGlu, ExpertBias
from engine.experts.routing.dispatch import Dispatch
from engine.quant.linear import QuantLinearSpec
from engine.quant.types import BF16, F16, F32
from engine.triton_support import HAS_TRITON

BM = 64  # grouped rows per tile
BN_GATE_UP = 32  # gate columns per program (and as many up columns): two [32, 256] weight tiles per K step
BN_DOWN = 64
NUM_WARPS = 8
NUM_STAGES = 3  # Triton's default: the x (or h) tiles of the next K steps load while this one multiplies
FP32_STAGES = 1  # fp32 operands: one buffer of each tile (Triton's default three outgrow shared memory)
DENSE_TYPES = {torch.bfloat16: BF16, torch.float16: F16, torch.float32: F32}
SWITCH = "WISP_GROUPED_EXPERTS"  # "0": large steps run expert by expert (the bench's before/after switch)
# Mean grouped rows per expert above which each expert's own GEMM (dequantized once) is faster: every row tile
# dequantizes its expert's weights again. H200, bench/results/2026-12-02-prefill: gpt-oss-20b's 1024 rows per
# expert took 43.6 ms grouped against 16.5 ms per expert; Qwen3's 512 took 19.5 against 39.6 (Q4_K_M).
MAX_ROWS_PER_EXPERT = 512


def runs_grouped(device: torch.device, activation, dispatch: Dispatch | None = None) -> bool:
    """Large steps on this device run the grouped kernels: CUDA with Triton, an activation they fuse, and (given
    the step's dispatch) at most MAX_ROWS_PER_EXPERT rows per expert on average. The choice depends on the step's
    routing alone, never on where the experts live, so every provider makes the same one."""
    return (HAS_TRITON and device.type == "cuda" and os.environ.get(SWITCH, "1") != "0"
            and (activation is SILU_GLU or isinstance(activation, ClampedSwiGlu))
            and (dispatch is None or dispatch.tokens.numel() <= MAX_ROWS_PER_EXPERT * dispatch.experts.size))


@dataclass(frozen=True)
class GroupedExpert:
    """Where an expert's three matrices sit in its slot row (bytes), and what runs between and after them."""

    gate: QuantLinearSpec  # [I, D]
    up: QuantLinearSpec  # [I, D]
    down: QuantLinearSpec  # [D, I]
    slot_bytes: int
    activation: object = SILU_GLU
    bias: ExpertBias | None = None

    @classmethod
    def dense(cls, hidden: int, intermediate: int, dtype: torch.dtype, activation=SILU_GLU,
              bias: ExpertBias | None = None) -> "GroupedExpert":
        """A dense block [gate (I*D) | up (I*D) | down (D*I)] of dtype."""
        qtype, size = DENSE_TYPES[dtype], hidden * intermediate * torch.empty((), dtype=dtype).element_size()
        return cls(QuantLinearSpec(qtype, intermediate, hidden, 0), QuantLinearSpec(qtype, intermediate, hidden, size),
                   QuantLinearSpec(qtype, hidden, intermediate, 2 * size), 3 * size, activation, bias)


def row_tiles(dispatch: Dispatch, units: np.ndarray, slots: np.ndarray, device) -> torch.Tensor:
    """The BM-row tiles of experts `units` (indices into dispatch.experts) whose blocks are rows `slots` of the
    table -> int32 [tiles, 4]: slot row, expert id, first grouped row, end of the expert's span."""
    starts, ends = dispatch.bounds[units], dispatch.bounds[units + 1]
    counts = -(-(ends - starts) // BM)
    unit = np.repeat(np.arange(units.size), counts)  # [tiles]
    within = np.arange(unit.size) - np.repeat(np.cumsum(counts) - counts, counts)
    tiles = np.stack([slots[unit], dispatch.experts[units][unit], starts[unit] + within * BM, ends[unit]], axis=1)
    return torch.from_numpy(tiles.astype(np.int32)).to(device)


def launch(kernel, grid, *args, **options):
    """kernel[grid](*args); where its pipeline stages outgrow the GPU's shared memory (consumer cards have ~99 KB a
    block, the H200 227 KB) it runs with one stage instead: the same arithmetic in the same order, so the same
    bits."""
    from triton.runtime.errors import OutOfResources

    try:
        return kernel[grid](*args, **options)
    except OutOfResources:
        return kernel[grid](*args, **{**options, "num_stages": 1})


def run_grouped(expert: GroupedExpert, table: torch.Tensor, dispatch: Dispatch, units, slots,
                out: torch.Tensor) -> tuple:
    """Experts `units` of the dispatch, whose blocks are rows `slots` of table [R, numel] (any dtype), computed in
    place in their spans of out [M, D] (their token rows on entry, their weighted outputs on return).
    -> the two launched kernels (their metadata holds shared memory and registers), () for no experts."""
    from engine.quant.grouped_kernels import grouped_down, grouped_gate_up
    from engine.quant.triton_kernels import TYPE_CODE, tile_shape

    units = np.asarray(units, dtype=np.int64)
    if units.size == 0:
        return ()
    tiles = row_tiles(dispatch, units, np.asarray(slots, dtype=np.int64), out.device)
    table = table.view(torch.uint8)  # [R, slot bytes]
    gate, up, down = expert.gate, expert.up, expert.down
    hidden, intermediate = down.out_features, down.in_features
    h = torch.empty(out.shape[0], intermediate, dtype=out.dtype, device=out.device)  # [M, I]
    clamped = isinstance(expert.activation, ClampedSwiGlu)
    ieee = out.dtype == torch.float32 or out.device.type != "cuda"  # the interpreter's 16-bit dot is wrong
    stages = {"num_stages": FP32_STAGES if out.dtype == torch.float32 else NUM_STAGES}
    bias = expert.bias
    (gate_g, gate_l), (up_g, up_l), (down_g, down_l) = (tile_shape(s.qtype) for s in (gate, up, down))
    first = launch(grouped_gate_up, (-(-intermediate // BN_GATE_UP), tiles.shape[0]),
        out, table, tiles, h, out if bias is None else bias.gate_up, table.shape[1], gate.byte_offset,
        up.byte_offset, gate.row_bytes, up.row_bytes, intermediate, hidden,
        expert.activation.alpha if clamped else 0.0, expert.activation.limit if clamped else 0.0,
        GATE_TYPE=TYPE_CODE[gate.qtype], UP_TYPE=TYPE_CODE[up.qtype], GATE_G=gate_g, GATE_L=gate_l, UP_G=up_g,
        UP_L=up_l, CLAMPED=clamped, HAS_BIAS=bias is not None, IEEE=ieee, BM=BM, BN=BN_GATE_UP, num_warps=NUM_WARPS,
        enable_fp_fusion=False, **stages)
    second = launch(grouped_down, (-(-hidden // BN_DOWN), tiles.shape[0]),
        h, table, tiles, out, dispatch.weights, out if bias is None else bias.down, table.shape[1],
        down.byte_offset, down.row_bytes, hidden, intermediate, DOWN_TYPE=TYPE_CODE[down.qtype], G=down_g, L=down_l,
        HAS_BIAS=bias is not None, IEEE=ieee, BM=BM, BN=BN_DOWN, num_warps=NUM_WARPS, enable_fp_fusion=False,
        **stages)
    return first, second
