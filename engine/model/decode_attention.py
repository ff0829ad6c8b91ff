"""Decode attention as one Triton kernel over the paged KV cache (opt-in: EngineOptions.attention="triton").

The default static-shape decode path gathers every sequence's keys and values, padded to max_model_len, into
a new buffer and runs SDPA over it with a mask: 2 x layers x max_model_len x KV heads x head_dim elements
copied per step, most of them padding. This kernel reads each sequence's own cache slots in place (through
its kv_index row, only up to its length), with an online softmax in fp32, one program per (sequence, KV
head) for all the query heads that share it. Its reduction order depends only on the position, never on
the padding, the batch or where a slot lives, so every expert mode gets the same bits from it. Not measured
on a GPU yet (2026-11-29): the engine keeps SDPA unless asked."""

from __future__ import annotations

import importlib.util

import torch

_built: dict = {}
BLOCK_N = 64  # positions per loop step


def available() -> bool:
    return importlib.util.find_spec("triton") is not None


def _kernel():
    if "kernel" in _built:
        return _built["kernel"]
    import triton
    import triton.language as tl

    @triton.jit
    def decode_attention(q_ptr, k_ptr, v_ptr, index_ptr, lengths_ptr, out_ptr, scale, max_len,
                         KVH: tl.constexpr, G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr,
                         BD: tl.constexpr, BN: tl.constexpr, BLOCKS: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
        g = tl.arange(0, BG)
        d = tl.arange(0, BD)
        g_ok, d_ok = g < G, d < D
        heads = kvh * G + g  # the query heads of this KV head
        q = tl.load(q_ptr + (b * KVH * G + heads)[:, None] * D + d[None, :], mask=g_ok[:, None] & d_ok[None, :],
                    other=0.0).to(tl.float32)  # [BG, BD]
        length = tl.load(lengths_ptr + b)
        m = tl.full([BG], float("-inf"), tl.float32)
        total = tl.zeros([BG], tl.float32)
        acc = tl.zeros([BG, BD], tl.float32)
        for block in range(BLOCKS):  # a fixed trip count (graph-safe); blocks past the length are skipped
            if block * BN < length:
                n = block * BN + tl.arange(0, BN)
                n_ok = n < length
                slots = tl.load(index_ptr + b * max_len + n, mask=n_ok, other=0)
                rows = (slots * KVH + kvh)[:, None] * D + d[None, :]
                kv_ok = n_ok[:, None] & d_ok[None, :]
                k = tl.load(k_ptr + rows, mask=kv_ok, other=0.0).to(tl.float32)  # [BN, BD]
                v = tl.load(v_ptr + rows, mask=kv_ok, other=0.0).to(tl.float32)
                s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale  # [BG, BN]
                s = tl.where(n_ok[None, :], s, float("-inf"))
                m_new = tl.maximum(m, tl.max(s, axis=1))
                p = tl.exp(s - m_new[:, None])
                alpha = tl.exp(m - m_new)
                total = total * alpha + tl.sum(p, axis=1)
                acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
                m = m_new
        out = acc / total[:, None]
        tl.store(out_ptr + (b * KVH * G + heads)[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=g_ok[:, None] & d_ok[None, :])

    _built["kernel"] = decode_attention
    return decode_attention


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_index: torch.Tensor,
                     lengths: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, H, D]; k_cache, v_cache [slots, KVH, D]; kv_index [B, L] slots of each context (padded);
    lengths [B] (at least 1). -> [B, H, D] in q's dtype."""
    import triton

    B, H, D = q.shape
    kv_heads = k_cache.shape[1]
    groups = H // kv_heads
    out = torch.empty_like(q)
    _kernel()[(B, kv_heads)](q.contiguous(), k_cache, v_cache, kv_index, lengths, out, scale, kv_index.shape[1],
                             KVH=kv_heads, G=groups, BG=max(triton.next_power_of_2(groups), 2), D=D,
                             BD=triton.next_power_of_2(D), BN=BLOCK_N, BLOCKS=triton.cdiv(kv_index.shape[1], BLOCK_N),
                             num_warps=4)
    return out
