"""Writing a decode step's new linear-attention states into their rows of the state cache: a Triton kernel on CUDA.

torch's index_copy_ (and index_put_) sort their indices first under torch's deterministic algorithms (the engine's
default on CUDA): several kernels per call, two calls per linear layer per step. Every sequence has its own state
row, so a plain row copy is deterministic by construction; each program copies one block of one row."""

from __future__ import annotations

import torch

BLOCK = 4096
_built: dict = {}


def _kernel():
    if "kernel" in _built:
        return _built["kernel"]
    import triton
    import triton.language as tl

    @triton.jit
    def store_rows(rows_ptr, pool_ptr, slots_ptr, width, BLOCK: tl.constexpr):
        r = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        ok = cols < width
        slot = tl.load(slots_ptr + r).to(tl.int64)
        tl.store(pool_ptr + slot * width + cols, tl.load(rows_ptr + r * width + cols, mask=ok), mask=ok)

    _built["kernel"] = store_rows
    return store_rows


def store_rows(pool: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    """pool [N, ...] contiguous; slots [B] distinct rows of it; rows [B, ...] -> rows[i] written at pool[slots[i]]."""
    import triton

    width = pool[0].numel()
    if rows.shape[0]:
        _kernel()[(rows.shape[0], triton.cdiv(width, BLOCK))](rows.to(pool.dtype).contiguous(), pool, slots, width,
                                                               BLOCK=BLOCK, num_warps=4)
