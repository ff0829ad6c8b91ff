"""The GEMM of a long step (a prompt) through a dense matrix held in its GGUF blocks: out[M, N] = x[M, K] @ W[N, K]^T,
each [BN, 256] weight tile dequantized inside the K loop from the blocks, so no float copy of the weight is made.

It is the grouped MoE GEMM's down kernel (engine.quant.grouped_kernels.grouped_down) run as a plain GEMM: one
"expert" whose slot row is the whole blocks buffer, every row of x routed to it with routing weight 1.0 (the kernel
multiplies by it in fp32: exact), in BM-row tiles (slot 0, expert 0, first row, M). Each (row tile, BN columns)
program owns its output tile and reduces K in one fixed ascending order: deterministic, and a row's result does not
depend on the rows beside it."""

from __future__ import annotations

import torch

from engine.quant.grouped_gemm import (FP32_STAGES, SMALL_TILES, WORD_TILES, configuration, launch)
from engine.quant.linear import QuantLinearSpec
from engine.quant.types import BLOCK_TYPES
from engine.system.triton_support import HAS_TRITON

# Long steps of at most this many rows run quant_matmul; longer ones dequantize the weight, then matmul (the faster
# of the two past it: bench/results/2026-12-02-merged-rows-h200). Tests set it to force either path.
AUTO_MAX_ROWS = 1024
TILES: str | None = None  # a sweep's "BM,BN,NUM_WARPS,NUM_STAGES" (bench probes, tests); None: tile_configuration's
TYPES = BLOCK_TYPES
# Two stages of 128-row bf16 tiles take ~192 KiB (the H200 has 227 KiB a block); launch() drops to one where they
# do not fit.
STAGES = 2


def runs_fused(x: torch.Tensor, spec: QuantLinearSpec) -> bool:
    """A long step of x through this matrix runs quant_matmul: CUDA with Triton, a block type the kernel reads, a
    float activation dtype, and at most AUTO_MAX_ROWS rows (the same rule in every expert mode)."""
    if not (HAS_TRITON and x.device.type == "cuda" and spec.qtype in TYPES
            and x.dtype in (torch.bfloat16, torch.float16, torch.float32)):
        return False
    return x.shape[0] <= AUTO_MAX_ROWS


def tile_configuration() -> tuple[int, int, int, int]:
    """(BM, BN, NUM_WARPS, NUM_STAGES): the grouped down kernel's rows, columns and warps with STAGES, or those of
    TILES's."""
    given = TILES
    if not given:
        bm, _, bn, warps, *_ = configuration()
        return bm, bn, warps, STAGES
    values = tuple(int(v) for v in given.split(","))
    if len(values) != 4:
        raise ValueError(f"dense tiles {given!r}: give BM,BN,NUM_WARPS,NUM_STAGES, e.g. 128,64,8,2")
    return values


def quant_matmul(x: torch.Tensor, blocks: torch.Tensor, spec: QuantLinearSpec) -> torch.Tensor:
    """x [M, K] (bf16, f16 or f32) times the matrix of `spec` in blocks (uint8, spec.byte_offset into it),
    transposed -> [M, N] in x's dtype: each output rounded once from its fp32 sum, the weights rounded to x's dtype
    as dequantize() gives them. Runs on CUDA, or on the CPU in Triton's interpreter."""
    from triton.runtime.errors import OutOfResources

    x = x.contiguous()
    config = tile_configuration()
    try:
        return launch_dense(x, blocks, spec, config)
    except OutOfResources as err:
        if config[0] <= SMALL_TILES[0]:
            raise
        err.__traceback__ = None  # see grouped_gemm.launch
        bm, _, bn, warps, stages = SMALL_TILES
        return launch_dense(x, blocks, spec, (bm, bn, warps, stages))


STEP: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # the last step's row tiles (every layer shares them)


def row_tiles(rows: int, bm: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The BM-row tiles of `rows` rows of the one matrix -> (int32 [ceil(rows / BM), 4]: slot row 0, expert 0,
    first row, rows; fp32 [rows] routing weights of 1.0), made on the device (no host copy) once per step shape: a
    prompt step's projections all take the same ones. While a CUDA graph is captured they are made afresh, in the
    graph's pool, so that a replay never reads tensors the cache has let go."""
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    key = (rows, bm, device)
    if not capturing and key in STEP:
        return STEP[key]
    starts = torch.arange(0, rows, bm, dtype=torch.int32, device=device)
    tiles = torch.stack([torch.zeros_like(starts), torch.zeros_like(starts), starts, torch.full_like(starts, rows)],
                        dim=1)
    made = tiles, torch.ones(rows, dtype=torch.float32, device=device)
    if not capturing:
        STEP.clear()
        STEP[key] = made
    return made


def launch_dense(x: torch.Tensor, blocks: torch.Tensor, spec: QuantLinearSpec,
                 config: tuple[int, int, int, int]) -> torch.Tensor:
    from engine.quant.grouped_kernels import grouped_down
    from engine.quant.triton_kernels import TYPE_CODE, tile_shape

    bm, bn, warps, stages = config
    rows, device = x.shape[0], x.device
    table = blocks.reshape(1, -1).view(torch.uint8)
    tiles, weights = row_tiles(rows, bm, device)
    out = torch.empty(rows, spec.out_features, dtype=x.dtype, device=device)
    fp32 = x.dtype == torch.float32
    ieee = fp32 or device.type != "cuda"  # the interpreter's 16-bit dot is wrong
    words = WORD_TILES and table.data_ptr() % 4 == 0 and spec.byte_offset % 4 == 0
    g, l = tile_shape(spec.qtype)
    launch(grouped_down, (-(-spec.out_features // bn), tiles.shape[0]),
           x, table, tiles, out, weights, out, 0, spec.byte_offset, spec.row_bytes, spec.out_features,
           spec.in_features, DOWN_TYPE=TYPE_CODE[spec.qtype], G=g, L=l, HAS_BIAS=False, IEEE=ieee, WORDS=words,
           EVEN_K=spec.in_features % 256 == 0, BM=bm, BN=bn, SWAP=False, num_warps=warps, enable_fp_fusion=False,
           num_stages=FP32_STAGES if fp32 else stages)
    return out
