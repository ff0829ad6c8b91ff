"""Decode attention as Triton kernels over the paged KV cache: the engine's choice on CUDA (EngineOptions.attention).

SDPA's decode kernels are not bitwise repeatable from one run of the same engine to the next at full model
shapes on CUDA, even under torch's deterministic algorithms, so no expert mode could promise a full-memory
run's bits with them. Here each sequence's own cache slots are read in place (through its kv_index row) in
chunks of CHUNK positions, one program per (sequence, KV head, chunk) for all the query heads that share the
KV head (tl.dot, fp32 softmax), as flash-decoding does; a second kernel, one program per query head, merges the
chunks MAX_CHUNKS_PER_LOAD at a time, so a long context merges in a few wide loads, not one per chunk.
Every reduction's order depends only on positions, never on the padding, the batch or where a slot lives.
Two options (gpt-oss), compiled in only when used so other models' kernels stay as they were: a sliding WINDOW
(the last WINDOW positions only; chunks before them do no work) and learned sinks (a per-head logit that joins
the softmax's max and sum at the merge and adds no value).
Its speed against SDPA: bench/results/2026-11-29-h200-identity/NOTES.md."""

from __future__ import annotations

import torch

_built: dict = {}
BLOCK_N = 64  # positions per tl.dot
CHUNK = 64  # positions per program (split-KV, as flash-decoding): B x KV heads x ceil(max_len / CHUNK) programs
MAX_CHUNKS_PER_LOAD = 128  # chunks the merge reads at once (fewer where a head's values are wide: registers)


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
                WINDOW: tl.constexpr, HAS_SINKS: tl.constexpr, SB: tl.constexpr):
        """The chunks of one (sequence, KV head, query head of its group), merged SB chunks per load: the exact
        maximum first, then the sums in blocks of SB chunks that start at multiples of SB, block after block in
        position order. Chunks outside the context weigh exactly 0, so the bits depend on positions only."""
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
        g = tl.program_id(2)
        d = tl.arange(0, BD)
        length = tl.load(lengths_ptr + b)
        first = 0
        if WINDOW > 0:
            first = tl.maximum(length - WINDOW, 0)
        lowest, end = first // CHUNK, tl.cdiv(length, CHUNK)  # the chunks that hold positions: [lowest, end)
        rows = ((b * KVH + kvh) * SPLITS) * BG + g  # chunk s of this head: rows + s * BG
        m = tl.max(tl.full([SB], float("-inf"), tl.float32), axis=0)
        for start in range((lowest // SB) * SB, end, SB):
            s = start + tl.arange(0, SB)
            m = tl.maximum(m, tl.max(tl.load(m_ptr + rows + s * BG, mask=(s >= lowest) & (s < end),
                                             other=float("-inf")), axis=0))
        head = kvh * G + g
        if HAS_SINKS:  # one more logit in the softmax, with no value
            sink = tl.load(sinks_ptr + head).to(tl.float32)
            m = tl.maximum(m, sink)
        total = tl.sum(tl.zeros([SB], tl.float32), axis=0)
        acc = tl.zeros([BD], tl.float32)
        for start in range((lowest // SB) * SB, end, SB):
            s = start + tl.arange(0, SB)
            ok = (s >= lowest) & (s < end)
            weight = tl.exp(tl.load(m_ptr + rows + s * BG, mask=ok, other=float("-inf")) - m)  # [SB], 0 outside
            total += tl.sum(tl.load(l_ptr + rows + s * BG, mask=ok, other=0.0) * weight, axis=0)
            values = tl.load(acc_ptr + (rows + s * BG)[:, None] * BD + d[None, :], mask=ok[:, None], other=0.0)
            acc += tl.sum(values * weight[:, None], axis=0)  # [BD]
        if HAS_SINKS:
            total += tl.exp(sink - m)
        out = acc / total
        tl.store(out_ptr + (b * KVH * G + head) * D + d, out.to(out_ptr.dtype.element_ty), mask=d < D)

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
    partial = _kernels()[0]
    q = q.contiguous()
    partial[(B, kv_heads, splits)](q, k_cache, v_cache, kv_index, lengths, m, total, acc, scale, max_len, splits,
                                   KVH=kv_heads, G=groups, BG=BG, D=D, BD=BD, BN=min(BLOCK_N, CHUNK), CHUNK=CHUNK,
                                   IEEE=q.dtype == torch.float32, WINDOW=window or 0, num_warps=4)
    merge_chunks(m, total, acc, lengths, sinks, out, groups, D, window or 0)
    return out


def merge_chunks(m: torch.Tensor, total: torch.Tensor, acc: torch.Tensor, lengths: torch.Tensor,
                 sinks: torch.Tensor | None, out: torch.Tensor, groups: int, dim: int, window: int = 0) -> None:
    """The combine kernel over a partial kernel's outputs: m, total [B, KV heads, splits, BG]; acc [B, KV heads,
    splits, BG, BD] -> out [B, KV heads * groups, dim], one program per query head."""
    B, kv_heads, splits, BG, BD = acc.shape
    chunks_per_load = min(MAX_CHUNKS_PER_LOAD, max(16, 8192 // BD))  # SB x BD fp32 values: registers, not spills
    _kernels()[1][(B, kv_heads, groups)](m, total, acc, lengths, m if sinks is None else sinks, out, KVH=kv_heads,
                                         G=groups, BG=BG, D=dim, BD=BD, CHUNK=CHUNK, SPLITS=splits,
                                         WINDOW=window, HAS_SINKS=sinks is not None, SB=chunks_per_load,
                                         num_warps=4)
