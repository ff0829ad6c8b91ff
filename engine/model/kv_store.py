"""Writing a step's new keys and values into the paged KV cache as one Triton kernel on CUDA.

torch's index_copy_ is the obvious way, but under torch's deterministic algorithms (the engine's default on
CUDA) it sorts its indices first: several kernels per call, two calls per layer per step. Every new token has
its own slot, so a plain row copy is deterministic by construction; one program copies one token's K and V."""

from __future__ import annotations

import torch

_built: dict = {}


def _kernel():
    if "kernel" in _built:
        return _built["kernel"]
    import triton
    import triton.language as tl

    @triton.jit
    def store_kv(k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slots_ptr, row, BLOCK: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        slot = tl.load(slots_ptr + t).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        ok = cols < row
        tl.store(k_cache_ptr + slot * row + cols, tl.load(k_ptr + t * row + cols, mask=ok), mask=ok)
        tl.store(v_cache_ptr + slot * row + cols, tl.load(v_ptr + t * row + cols, mask=ok), mask=ok)

    _built["kernel"] = store_kv
    return store_kv


def store_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor, k: torch.Tensor,
             v: torch.Tensor) -> None:
    """k_cache, v_cache [slots, KVH, D]; slots [T] (distinct); k, v [T, KVH, D] -> written at their slots."""
    import triton

    row = k_cache.shape[1] * k_cache.shape[2]
    if k.shape[0]:
        _kernel()[(k.shape[0],)](k.contiguous(), v.contiguous(), k_cache, v_cache, slots, row,
                                 BLOCK=triton.next_power_of_2(row), num_warps=4)
