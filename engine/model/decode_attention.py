"""Decode attention as Triton kernels over the paged KV cache: the engine's choice on CUDA (EngineOptions.attention).

SDPA's decode kernels are not bitwise repeatable from one run of the same engine to the next at full model
shapes on CUDA, even under torch's deterministic algorithms, so no expert mode could promise a full-memory
run's bits with them. Here each sequence's own cache slots are read in place (through its kv_index row) in
chunks of CHUNK positions, one program per (sequence, KV head, chunk) for all the query heads that share the
KV head (tl.dot, fp32 softmax), as flash-decoding does; a second kernel merges the chunks in position order.
Every reduction's order depends only on positions, never on the padding, the batch or where a slot lives.
Two options (gpt-oss), compiled in only when used so other models' kernels stay as they were: a sliding WINDOW
(the last WINDOW positions only; chunks before them do no work) and learned sinks (a per-head logit that joins
the softmax's max and sum at the merge and adds no value).
Its speed against SDPA: bench/results/2026-11-29-h200-identity/NOTES.md."""

from __future__ import annotations

import torch

_built: dict = {}
BLOCK_N = 64  # positions per tl.dot
CHUNK = 256  # positions per program (split-KV, as flash-decoding): B x KV heads x ceil(max_len / CHUNK) programs


def _kernels():
    if "kernels" in _built:
        return _built["kernels"]
    import triton
    import triton.language as tl

    @triton.jit
    def partial(q_ptr, k_ptr, v_ptr, index_ptr, lengths_ptr, m_ptr, l_ptr, acc_ptr, scale, max_len, splits,
                KVH: tl.constexpr, G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                BN: tl.constexpr, CHUNK: tl.constexpr, IEEE: tl.constexpr, WINDOW: tl.constexpr):
        """One (sequence, KV head, chunk of CHUNK positions): its softmax max, sum and weighted values."""
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
        split = tl.program_id(2)
        g = tl.arange(0, BG)
        d = tl.arange(0, BD)
        g_ok, d_ok = g < G, d < D
        heads = kvh * G + g  # the query heads of this KV head
        q = tl.load(q_ptr + (b * KVH * G + heads)[:, None] * D + d[None, :], mask=g_ok[:, None] & d_ok[None, :],
                    other=0.0)  # [BG, BD]
        length = tl.load(lengths_ptr + b)
        first = 0
        if WINDOW > 0:
            first = tl.maximum(length - WINDOW, 0)
        m = tl.full([BG], float("-inf"), tl.float32)
        total = tl.zeros([BG], tl.float32)
        acc = tl.zeros([BG, BD], tl.float32)
        for block in range(CHUNK // BN):  # a fixed trip count; blocks past the length are skipped
            start = split * CHUNK + block * BN
            if start < length and start + BN > first:
                n = start + tl.arange(0, BN)
                n_ok = n < length
                if WINDOW > 0:
                    n_ok = n_ok & (n >= first)
                slots = tl.load(index_ptr + b * max_len + n, mask=n_ok, other=0).to(tl.int64)
                rows = (slots * KVH + kvh)[:, None] * D + d[None, :]
                kv_ok = n_ok[:, None] & d_ok[None, :]
                k = tl.load(k_ptr + rows, mask=kv_ok, other=0.0)  # [BN, BD]
                v = tl.load(v_ptr + rows, mask=kv_ok, other=0.0)
                if IEEE:
                    s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # [BG, BN]
                else:
                    s = tl.dot(q, tl.trans(k)) * scale
                s = tl.where(n_ok[None, :], s, float("-inf"))
                m_new = tl.maximum(m, tl.max(s, axis=1))
                p = tl.exp(s - m_new[:, None])
                alpha = tl.exp(m - m_new)
                total = total * alpha + tl.sum(p, axis=1)
                if IEEE:
                    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
                else:
                    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m = m_new
        at = (b * KVH + kvh) * splits + split
        tl.store(m_ptr + at * BG + g, m)
        tl.store(l_ptr + at * BG + g, total)
        tl.store(acc_ptr + (at * BG + g)[:, None] * BD + d[None, :], acc)

    @triton.jit
    def combine(m_ptr, l_ptr, acc_ptr, lengths_ptr, sinks_ptr, out_ptr, KVH: tl.constexpr, G: tl.constexpr,
                BG: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, CHUNK: tl.constexpr, SPLITS: tl.constexpr,
                WINDOW: tl.constexpr, HAS_SINKS: tl.constexpr):
        """The chunks of one (sequence, KV head), merged in position order: the bits never depend on padding."""
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
        g = tl.arange(0, BG)
        d = tl.arange(0, BD)
        length = tl.load(lengths_ptr + b)
        first = 0
        if WINDOW > 0:
            first = tl.maximum(length - WINDOW, 0)
        m = tl.full([BG], float("-inf"), tl.float32)
        total = tl.zeros([BG], tl.float32)
        acc = tl.zeros([BG, BD], tl.float32)
        for split in range(SPLITS):  # a fixed trip count (CUDA graphs); chunks past the length are skipped
            if split * CHUNK < length and (split + 1) * CHUNK > first:
                at = (b * KVH + kvh) * SPLITS + split
                m_s = tl.load(m_ptr + at * BG + g)
                m_new = tl.maximum(m, m_s)
                alpha, beta = tl.exp(m - m_new), tl.exp(m_s - m_new)
                total = total * alpha + tl.load(l_ptr + at * BG + g) * beta
                acc = acc * alpha[:, None] + tl.load(acc_ptr + (at * BG + g)[:, None] * BD + d[None, :]) * beta[:, None]
                m = m_new
        heads = kvh * G + g
        if HAS_SINKS:  # one more logit in the softmax, with no value
            sink = tl.load(sinks_ptr + heads, mask=g < G, other=0.0).to(tl.float32)
            m_new = tl.maximum(m, sink)
            alpha = tl.exp(m - m_new)
            total = total * alpha + tl.exp(sink - m_new)
            acc = acc * alpha[:, None]
        out = acc / total[:, None]
        tl.store(out_ptr + (b * KVH * G + heads)[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=(g < G)[:, None] & (d < D)[None, :])

    _built["kernels"] = partial, combine
    return partial, combine


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_index: torch.Tensor,
                     lengths: torch.Tensor, scale: float, window: int | None = None,
                     sinks: torch.Tensor | None = None) -> torch.Tensor:
    """q [B, H, D]; k_cache, v_cache [slots, KVH, D]; kv_index [B, L] slots of each context (padded);
    lengths [B] (at least 1); window: attend to the last `window` positions only; sinks [H]: a learned logit per
    head in every softmax. -> [B, H, D] in q's dtype."""
    import triton

    B, H, D = q.shape
    kv_heads = k_cache.shape[1]
    groups = H // kv_heads
    max_len = kv_index.shape[1]
    splits = triton.cdiv(max_len, CHUNK)
    BG, BD = max(triton.next_power_of_2(groups), 16), max(triton.next_power_of_2(D), 16)  # tl.dot needs >= 16
    m = torch.empty(B, kv_heads, splits, BG, dtype=torch.float32, device=q.device)
    total = torch.empty_like(m)
    acc = torch.empty(B, kv_heads, splits, BG, BD, dtype=torch.float32, device=q.device)
    out = torch.empty_like(q)
    partial, combine = _kernels()
    q = q.contiguous()
    partial[(B, kv_heads, splits)](q, k_cache, v_cache, kv_index, lengths, m, total, acc, scale, max_len, splits,
                                   KVH=kv_heads, G=groups, BG=BG, D=D, BD=BD, BN=BLOCK_N, CHUNK=CHUNK,
                                   IEEE=q.dtype == torch.float32, WINDOW=window or 0, num_warps=4)
    combine[(B, kv_heads)](m, total, acc, lengths, q if sinks is None else sinks, out, KVH=kv_heads, G=groups,
                           BG=BG, D=D, BD=BD, CHUNK=CHUNK, SPLITS=splits, WINDOW=window or 0,
                           HAS_SINKS=sinks is not None, num_warps=4)
    return out
