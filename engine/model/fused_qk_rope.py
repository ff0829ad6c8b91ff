"""A step's per-head q/k RMSNorm, RoPE and KV-cache write as one Triton kernel on CUDA: op by op (fused_norm,
fused_rope, kv_store) that is 5 launches per layer of a launch-bound decode step. One program per (token, head)
over the q heads, then the kv heads: a q head is normed and turned into q_out; a kv head's key is normed, turned
and written at the token's cache slot, its value copied there. The norm is fused_norm's rms_norm (the same
layout, reduction and roundings: one [next_pow2(D)] row over 4 warps); RoPE is fused_rope's (each product and the
sum rounded to the dtype), its partner channels normed with the same scale. So the bits are those of the three
kernels it replaces. With the zero-centred norm (the hybrids' GatedAttention) the norm is
engine.model.centred_norm_kernels' instead. Imported only where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.system.triton_rounding import rounded


@triton.jit
def norm_rope(src, w_ptr, cos_row, sin_row, c, D, eps, offset, NORM: tl.constexpr, CENTRED: tl.constexpr,
              ROT: tl.constexpr, dtype: tl.constexpr):
    """One head's row at src -> normed (NORM) and turned over its first ROT channels, as float32 of dtype values.
    CENTRED: the zero-centred norm (engine.model.hybrid_layers.ZeroCenteredRMSNorm), x * scale * (offset + w) in
    fp32 rounded once, instead of fused_norm's w * round(x * scale)."""
    ok = c < D
    half = ROT // 2
    turned = c < ROT
    partner_c = tl.where(c < half, c + half, c - half)
    x = tl.load(src + c, mask=ok, other=0.0).to(tl.float32)
    partner = tl.load(src + partner_c, mask=turned, other=0.0).to(tl.float32)
    if NORM:
        scale = tl.math.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float32)
        w_partner = tl.load(w_ptr + partner_c, mask=turned, other=0.0).to(tl.float32)
        if CENTRED:
            x = rounded((x * scale) * (w + offset), dtype)
            partner = rounded((partner * scale) * (w_partner + offset), dtype)
        else:
            x = rounded(w * rounded(x * scale, dtype), dtype)
            partner = rounded(w_partner * rounded(partner * scale, dtype), dtype)
    cos = tl.load(cos_row + c, mask=turned, other=0.0).to(tl.float32)
    sin = tl.load(sin_row + c, mask=turned, other=0.0).to(tl.float32)
    rotated = tl.where(c < half, -partner, partner)
    y = rounded(rounded(x * cos, dtype) + rounded(rotated * sin, dtype), dtype)
    return tl.where(turned, y, x)


@triton.jit
def qk_rope_store_kernel(q_ptr, k_ptr, v_ptr, q_weight_ptr, k_weight_ptr, cos_ptr, sin_ptr, slots_ptr, q_out_ptr,
                         k_cache_ptr, v_cache_ptr, q_stride, q_head_stride, k_stride, v_stride, H, KVH, D, eps, offset,
                         NORM: tl.constexpr, CENTRED: tl.constexpr, ROT: tl.constexpr, BD: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    c = tl.arange(0, BD)
    ok = c < D
    dtype = q_out_ptr.dtype.element_ty
    cos_row, sin_row = cos_ptr + t * ROT, sin_ptr + t * ROT
    if head < H:
        row = (t * H + head) * D
        y = norm_rope(q_ptr + t * q_stride + head * q_head_stride, q_weight_ptr, cos_row, sin_row, c, D, eps, offset,
                      NORM, CENTRED, ROT, dtype)
        tl.store(q_out_ptr + row + c, y.to(dtype), mask=ok)
    else:
        kv_head = head - H
        cached = (tl.load(slots_ptr + t).to(tl.int64) * KVH + kv_head) * D
        y = norm_rope(k_ptr + t * k_stride + kv_head * D, k_weight_ptr, cos_row, sin_row, c, D, eps, offset, NORM,
                      CENTRED, ROT, dtype)
        tl.store(k_cache_ptr + cached + c, y.to(dtype), mask=ok)
        tl.store(v_cache_ptr + cached + c, tl.load(v_ptr + t * v_stride + kv_head * D + c, mask=ok), mask=ok)


def fused_qk_rope_store(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_weight: torch.Tensor | None,
                        k_weight: torch.Tensor | None, eps: float, cos: torch.Tensor, sin: torch.Tensor,
                        slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        centred_offset: float | None = None) -> torch.Tensor:
    """q [T, H, hd], k and v [T, KVH, hd] (each token's heads contiguous, q's heads at any stride too; tokens at
    any stride: views of a merged projection's output); q/k norm weights [hd] (None: no norm); cos, sin
    [T, rotary_dim]; slots [T] (distinct); caches [slots, KVH, hd] -> q normed and turned [T, H, hd]; k (normed,
    turned) and v written at their slots. centred_offset: the norms are zero-centred, their scale offset + weight
    in fp32 (weights of any float dtype)."""
    T, H, D = q.shape
    KVH = k.shape[1]
    out = torch.empty(T, H, D, dtype=q.dtype, device=q.device)
    norm = q_weight is not None
    q = q if q.stride(2) == 1 else q.contiguous()
    k, v = heads_contiguous(k), heads_contiguous(v)
    if T:
        qk_rope_store_kernel[(T, H + KVH)](q, k, v, q_weight if norm else q, k_weight if norm else k,
                                           cos.contiguous(), sin.contiguous(), slots, out, k_cache, v_cache,
                                           q.stride(0), q.stride(1), k.stride(0), v.stride(0), H, KVH, D, eps,
                                           centred_offset or 0.0, NORM=norm, CENTRED=centred_offset is not None,
                                           ROT=cos.shape[-1], BD=triton.next_power_of_2(D),
                                           num_warps=4 if D <= 1024 else 8)
    return out


def heads_contiguous(x: torch.Tensor) -> torch.Tensor:
    """x [T, heads, D] as it is where each token's heads are one contiguous run, else a contiguous copy."""
    return x if x.stride(2) == 1 and x.stride(1) == x.shape[2] else x.contiguous()
