"""MLA decode with kv_b_proj absorbed: a Triton kernel reads the compressed cache rows in place (the CUDA path).

Shapes: B sequences, H heads, R kv_lora_rank, P qk_rope_head_dim, N qk_nope_head_dim, V v_head_dim, L context.
A score q_nope . k_nope + q_pe . k_pe equals (q_nope W_uk) . c_kv + q_pe . k_pe, where W_uk [H, N, R] is
kv_b_proj's key part: every head's query becomes [R + P] against rows [R + P] that all heads share. The output
softmax . c_kv [H, R] times W_uv [H, V, R] is the attention output. The kernel loads each block of rows once for
a block of G heads and uses c_kv as both keys and values; like engine.model.decode_attention it splits the
context into CHUNK-position programs merged in position order (its combine kernel), so the bits depend only on
positions: never on the batch, the padding or where a slot lives."""

from __future__ import annotations

import torch

from engine.model.decode_attention import CHUNK, merge_chunks

_built: dict = {}
BLOCK_N = 32  # positions per tl.dot: [G, R] x [R, BLOCK_N] with R = 512 fits the shared memory
MAX_HEADS_PER_PROGRAM = 16


def absorb_query(q: torch.Tensor, kv_b_weight: torch.Tensor, nope_dim: int) -> torch.Tensor:
    """q [B, H, N + P]; kv_b_weight [H * (N + V), R] -> queries against the cache rows [B, H, R + P]."""
    H, rank = q.shape[1], kv_b_weight.shape[1]
    w_uk = kv_b_weight.view(H, -1, rank)[:, :nope_dim]  # [H, N, R]
    q_latent = torch.einsum("bhn,hnr->bhr", q[..., :nope_dim], w_uk)  # [B, H, R]
    return torch.cat((q_latent, q[..., nope_dim:]), dim=-1)


def absorb_output(out: torch.Tensor, kv_b_weight: torch.Tensor, nope_dim: int) -> torch.Tensor:
    """softmax . c_kv [B, H, R] -> the attention output [B, H, V]."""
    H, rank = out.shape[1], kv_b_weight.shape[1]
    w_uv = kv_b_weight.view(H, -1, rank)[:, nope_dim:]  # [H, V, R]
    return torch.einsum("bhr,hvr->bhv", out, w_uv)


def _partial_kernel():
    if "partial" in _built:
        return _built["partial"]
    import triton
    import triton.language as tl

    @triton.jit
    def partial(q_ptr, pool_ptr, index_ptr, lengths_ptr, m_ptr, l_ptr, acc_ptr, scale, max_len, splits,
                HB: tl.constexpr, G: tl.constexpr, BG: tl.constexpr, R: tl.constexpr, BR: tl.constexpr,
                P: tl.constexpr, BP: tl.constexpr, BN: tl.constexpr, CHUNK: tl.constexpr, IEEE: tl.constexpr):
        """One (sequence, block of G heads, chunk of CHUNK positions): softmax max, sum and weighted c_kv."""
        b = tl.program_id(0).to(tl.int64)
        hb = tl.program_id(1)
        split = tl.program_id(2)
        g = tl.arange(0, BG)
        r = tl.arange(0, BR)
        p = tl.arange(0, BP)
        g_ok, r_ok, p_ok = g < G, r < R, p < P
        q_rows = (b * HB * G + hb * G + g)[:, None] * (R + P)
        q_latent = tl.load(q_ptr + q_rows + r[None, :], mask=g_ok[:, None] & r_ok[None, :], other=0.0)  # [BG, BR]
        q_pe = tl.load(q_ptr + q_rows + R + p[None, :], mask=g_ok[:, None] & p_ok[None, :], other=0.0)  # [BG, BP]
        length = tl.load(lengths_ptr + b)
        m = tl.full([BG], float("-inf"), tl.float32)
        total = tl.zeros([BG], tl.float32)
        acc = tl.zeros([BG, BR], tl.float32)
        for block in range(CHUNK // BN):  # a fixed trip count; blocks past the length are skipped
            start = split * CHUNK + block * BN
            if start < length:
                n = start + tl.arange(0, BN)
                n_ok = n < length
                rows = tl.load(index_ptr + b * max_len + n, mask=n_ok, other=0).to(tl.int64)[:, None] * (R + P)
                c_kv = tl.load(pool_ptr + rows + r[None, :], mask=n_ok[:, None] & r_ok[None, :], other=0.0)  # [BN, BR]
                k_pe = tl.load(pool_ptr + rows + R + p[None, :], mask=n_ok[:, None] & p_ok[None, :], other=0.0)
                if IEEE:
                    s = tl.dot(q_latent, tl.trans(c_kv), input_precision="ieee")
                    s = (s + tl.dot(q_pe, tl.trans(k_pe), input_precision="ieee")) * scale  # [BG, BN]
                else:
                    s = (tl.dot(q_latent, tl.trans(c_kv)) + tl.dot(q_pe, tl.trans(k_pe))) * scale
                s = tl.where(n_ok[None, :], s, float("-inf"))
                m_new = tl.maximum(m, tl.max(s, axis=1))
                weights = tl.exp(s - m_new[:, None])
                alpha = tl.exp(m - m_new)
                total = total * alpha + tl.sum(weights, axis=1)
                if IEEE:
                    acc = acc * alpha[:, None] + tl.dot(weights.to(c_kv.dtype), c_kv, input_precision="ieee")
                else:
                    acc = acc * alpha[:, None] + tl.dot(weights.to(c_kv.dtype), c_kv)
                m = m_new
        at = (b * HB + hb) * splits + split
        tl.store(m_ptr + at * BG + g, m)
        tl.store(l_ptr + at * BG + g, total)
        tl.store(acc_ptr + (at * BG + g)[:, None] * BR + r[None, :], acc)

    _built["partial"] = partial
    return partial


def heads_per_program(num_heads: int) -> int:
    """The largest divisor of num_heads up to MAX_HEADS_PER_PROGRAM: head blocks tile the heads exactly."""
    return max(g for g in range(1, min(num_heads, MAX_HEADS_PER_PROGRAM) + 1) if num_heads % g == 0)


def latent_decode(q_rows: torch.Tensor, pool: torch.Tensor, kv_index: torch.Tensor, lengths: torch.Tensor,
                  rank: int, scale: float) -> torch.Tensor:
    """q_rows [B, H, R + P] (absorb_query); pool [slots, 1, R + P]; kv_index [B, L] slots of each context (padded);
    lengths [B] (at least 1) -> softmax . c_kv [B, H, R] in q's dtype."""
    import triton

    B, H, row = q_rows.shape
    rope_dim = row - rank
    G = heads_per_program(H)
    head_blocks = H // G
    max_len = kv_index.shape[1]
    splits = triton.cdiv(max_len, CHUNK)
    BG, BR = max(triton.next_power_of_2(G), 16), max(triton.next_power_of_2(rank), 16)  # tl.dot needs >= 16
    m = torch.empty(B, head_blocks, splits, BG, dtype=torch.float32, device=q_rows.device)
    total = torch.empty_like(m)
    acc = torch.empty(B, head_blocks, splits, BG, BR, dtype=torch.float32, device=q_rows.device)
    out = q_rows.new_empty(B, H, rank)
    _partial_kernel()[(B, head_blocks, splits)](
        q_rows.contiguous(), pool, kv_index, lengths, m, total, acc, scale, max_len, splits, HB=head_blocks, G=G,
        BG=BG, R=rank, BR=BR, P=rope_dim, BP=max(triton.next_power_of_2(rope_dim), 16), BN=BLOCK_N, CHUNK=CHUNK,
        IEEE=q_rows.dtype == torch.float32, num_warps=8)
    merge_chunks(m, total, acc, lengths, None, out, G, rank)  # head blocks stand where KV heads stand there
    return out
