"""A softmax router's selection as one Triton kernel on CUDA: the logits' fp32 softmax, the top-k (or the weights
of given ids), the renormalisation and the cast to the weights' dtype. Op for op (dispatch.route,
transformer.routed_weights) that is 6 launches per layer of a launch-bound decode step: a cast, the softmax,
topk or gather, a sum, a division and a cast.

The softmax adds as torch's warp softmax (rows of <= 1024 entries: PyTorch's persistent_softmax.cuh) adds: a row
padded to P = 2^n entries is W = min(P, 32) lanes of P / W entries each, entry i on lane i % W; each lane sums its
entries in order, then the lanes are folded in halves (lane l += lane l + W/2, ..., as the warp's xor shuffles
add); exp is libdevice's expf and each probability is exp / sum in IEEE division (div_rn: Triton's `/` divides
approximately). Top-k: the largest probabilities, ties broken towards the lower expert id (the ids CUDA's
torch.topk selects at the k-th value), in descending order. The K selected weights are summed in k order for the
renormalisation. Imported only where Triton is installed."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.system.triton_rounding import rounded

try:
    from triton.language.extra import libdevice
except ImportError:  # Triton 3.0
    from triton.language.extra.cuda import libdevice

MAX_EXPERTS = 1024  # torch's warp softmax's limit, whose adds the kernel reproduces


@triton.jit
def expf(x, LIBDEVICE: tl.constexpr):
    """CUDA's expf (libdevice's, what torch's softmax calls); numpy's exp in the interpreter, which has no libdevice."""
    if LIBDEVICE:
        return libdevice.exp(x)
    else:
        return tl.exp(x)


@triton.jit
def fused_router_kernel(logits_ptr, ids_ptr, ids_stride, weights_ptr, E, K: tl.constexpr, BK: tl.constexpr,
                        W: tl.constexpr, LOG_W: tl.constexpr, ITER: tl.constexpr, GIVEN_IDS: tl.constexpr,
                        NORMALIZE: tl.constexpr, LIBDEVICE: tl.constexpr):
    """One token row: logits [E] -> weights [K] (and ids [K] unless GIVEN_IDS: then ids are read at ids_stride)."""
    t = tl.program_id(0).to(tl.int64)
    row = logits_ptr + t * E
    lane = tl.arange(0, W)
    index = tl.arange(0, ITER)[:, None] * W + lane[None, :]  # [ITER, W]: entry it * W + l on lane l
    logits = tl.load(row + index, mask=index < E, other=float("-inf")).to(tl.float32)
    top = tl.max(tl.max(logits, axis=1), axis=0)
    lane_sum = tl.zeros([W], tl.float32)
    for it in tl.static_range(ITER):
        entry = tl.load(row + it * W + lane, mask=it * W + lane < E, other=float("-inf")).to(tl.float32)
        lane_sum += expf(entry - top, LIBDEVICE)
    for fold in tl.static_range(LOG_W):  # lane l += lane l + W / 2^(fold + 1)
        lane_sum = tl.sum(tl.reshape(lane_sum, [2, W >> (fold + 1)]), axis=0)
    total = tl.sum(lane_sum, axis=0)  # one entry left
    probs = tl.where(index < E, tl.math.div_rn(expf(logits - top, LIBDEVICE), total), -1.0)  # [ITER, W]
    k_index = tl.arange(0, BK)
    picked = tl.zeros([BK], tl.float32)
    ids = tl.zeros([BK], tl.int64)
    picked_sum = 0.0
    for k in tl.static_range(K):
        if GIVEN_IDS:
            expert = tl.load(ids_ptr + t * ids_stride + k).to(tl.int32)
            value = tl.sum(tl.sum(tl.where(index == expert, probs, 0.0), axis=1), axis=0)
        else:
            value = tl.max(tl.max(probs, axis=1), axis=0)
            expert = tl.min(tl.min(tl.where(probs == value, index, 2**30), axis=1), axis=0)
            probs = tl.where(index == expert, -2.0, probs)
        picked = tl.where(k_index == k, value, picked)
        ids = tl.where(k_index == k, expert.to(tl.int64), ids)
        picked_sum += value
    if NORMALIZE:
        picked = tl.math.div_rn(picked, picked_sum)
    dtype = weights_ptr.dtype.element_ty
    tl.store(weights_ptr + t * K + k_index, rounded(picked, dtype).to(dtype), mask=k_index < K)
    if not GIVEN_IDS:
        tl.store(ids_ptr + t * K + k_index, ids, mask=k_index < K)


def can_fuse(logits: torch.Tensor) -> bool:
    return logits.is_cuda and logits.dim() == 2 and logits.shape[1] <= MAX_EXPERTS


def fused_route(logits: torch.Tensor, top_k: int, normalize: bool, weights_dtype: torch.dtype,
                ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [T, E] -> (ids [T, K] int64, weights [T, K] in weights_dtype), as dispatch.route computes them;
    with ids [T, K] given (any row stride, last dim contiguous): those ids and their weights, as
    transformer.routed_weights computes them."""
    T, E = logits.shape
    if ids is not None and ids.stride(-1) != 1:
        ids = ids.contiguous()
    out_ids = ids if ids is not None else torch.empty(T, top_k, dtype=torch.long, device=logits.device)
    weights = torch.empty(T, top_k, dtype=weights_dtype, device=logits.device)
    padded = triton.next_power_of_2(E)
    lanes = min(padded, 32)
    if T:
        fused_router_kernel[(T,)](logits.contiguous(), out_ids, out_ids.stride(0), weights, E, K=top_k,
                                  BK=max(2, triton.next_power_of_2(top_k)), W=lanes, LOG_W=lanes.bit_length() - 1,
                                  ITER=padded // lanes,
                                  GIVEN_IDS=ids is not None, NORMALIZE=normalize,
                                  LIBDEVICE=os.environ.get("TRITON_INTERPRET") != "1", num_warps=1,
                                  enable_fp_fusion=False)
    return out_ids, weights
