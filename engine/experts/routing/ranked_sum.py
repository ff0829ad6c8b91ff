"""combine()'s sum as one Triton kernel on CUDA: each token's K weighted expert outputs added one at a time in
ascending expert-id order, rounded to the outputs' dtype after every add, exactly as the torch version
(argsort + gather + a zero tensor + K adds: K + 3 launches per layer-step of a launch-bound decode step) adds them,
so the bits are the same. Expert ids of one token are distinct (top-k), so an entry's rank is the number of the
token's ids below its own. Imported only where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.system.triton_rounding import rounded


@triton.jit
def ranked_sum_kernel(out_ptr, rows_ptr, ids_ptr, total_ptr, D, K: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr,
                      ROWS: tl.constexpr):
    """total[t, d] = out[r(t, k_0), d] + out[r(t, k_1), d] + ... with ids[t, k_0] < ids[t, k_1] < ..., where the
    row r(t, k) of entry (t, k) is rows[t, k] (ROWS: out [M, D] grouped by expert), else t * K + k (out [T, K, D])."""
    t = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    d_ok = d < D
    k = tl.arange(0, BK)
    ids = tl.load(ids_ptr + t * K + k, mask=k < K, other=2**62)
    rank = tl.sum((ids[None, :] < ids[:, None]).to(tl.int32), axis=1)  # [BK]
    total = tl.zeros([BD], tl.float32)  # always a value of out's dtype
    for r in tl.static_range(K):
        entry = tl.sum(tl.where(rank == r, k, 0), axis=0)
        if ROWS:
            row = tl.load(rows_ptr + t * K + entry).to(tl.int64)
        else:
            row = t * K + entry
        value = tl.load(out_ptr + row * D + d, mask=d_ok, other=0.0)
        total = rounded(total + value.to(tl.float32), total_ptr.dtype.element_ty)
    tl.store(total_ptr + t * D + d, total.to(total_ptr.dtype.element_ty), mask=d_ok)


def ranked_sum(out: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """out [T, K, D], ids [T, K] (distinct per token) -> [T, D]: the K rows of each token summed in ascending
    expert-id order in out's dtype. With rows [T, K]: out is [M, D] and entry (t, k) is its row rows[t, k] (a
    large step's outputs grouped by expert, engine.experts.routing.dispatch.combine_grouped)."""
    T, K = ids.shape
    D = out.shape[-1]
    total = out.new_empty(T, D)
    block = min(1024, triton.next_power_of_2(D))
    index = rows.contiguous() if rows is not None else ids
    ranked_sum_kernel[(T, triton.cdiv(D, block))](out.contiguous(), index, ids.contiguous(), total, D, K=K,
                                                  BK=max(16, triton.next_power_of_2(K)), BD=block,
                                                  ROWS=rows is not None, num_warps=4, enable_fp_fusion=False)
    return total
