"""Prefill attention with learned sinks and a sliding window (gpt-oss) as one Triton flash-attention kernel: the
engine's choice on CUDA wherever the Triton decode kernel runs. The torch formula in
engine.model.sink_attention stays the CPU path and the reference.

The torch formula takes the queries in chunks that keep the [H, c, L] scores small; on a full layer of a long
prompt that is thousands of chunks of a few rows, each a dozen kernels. Here one program per (block of BLOCK_M
query rows, query head) walks the key blocks that its causal/window mask reaches, in ascending order, with an
online softmax in fp32 (the sink starts it: m = sink logit, l = exp(sink - m) = 1, no value), and writes its own
output tile. No reduction crosses programs and the key order is fixed, so the bits repeat from run to run; they
are not the torch formula's bits (another summation order), only close to them. Key blocks start at multiples of
BLOCK_N whatever the query block, and a block a row does not reach adds exactly 0 to it, so a row's bits depend on
its position and the keys only: a prompt in chunks (after a cached prefix) gives the bits of the whole prompt.

Shapes: q query rows, L context positions, H query heads, KVH KV heads (H = KVH * G), hd head size."""

from __future__ import annotations

import torch

from engine.system.triton_support import HAS_TRITON

# head size -> (BLOCK_M, BLOCK_N, num_warps, num_stages)
TILES = {64: (64, 64, 4, 2), 128: (64, 32, 4, 2)}
_built: dict = {}


def is_sink_flash_on() -> bool:
    """Whether prefill of sink/window layers may take the kernel (the caller checks the device)."""
    return HAS_TRITON


def _kernel():
    if "kernel" in _built:
        return _built["kernel"]
    import triton
    import triton.language as tl

    @triton.jit
    def forward(q_ptr, k_ptr, v_ptr, sinks_ptr, out_ptr, scale, q_len, kv_len, q_row, q_head, k_row, k_head,
                v_row, v_head, o_row, o_head, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, WINDOW: tl.constexpr, HAS_SINKS: tl.constexpr,
                IEEE: tl.constexpr):
        """One block of BM query rows of one query head over the key blocks its mask reaches."""
        block = tl.program_id(0)
        head = tl.program_id(1)
        kvh = head // G
        offset = kv_len - q_len  # position of query row 0
        rows = block * BM + tl.arange(0, BM)
        d = tl.arange(0, BD)
        d_ok = d < D
        row_ok = rows < q_len
        query_pos = offset + rows  # [BM]
        q = tl.load(q_ptr + rows.to(tl.int64)[:, None] * q_row + head * q_head + d[None, :],
                    mask=row_ok[:, None] & d_ok[None, :], other=0.0)  # [BM, BD]
        if HAS_SINKS:  # the sink column: a raw logit beside the scaled scores, with no value
            m = tl.zeros([BM], tl.float32) + tl.load(sinks_ptr + head).to(tl.float32)
            total = tl.zeros([BM], tl.float32) + 1.0
        else:
            m = tl.full([BM], float("-inf"), tl.float32)
            total = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, BD], tl.float32)
        end = tl.minimum(offset + (block + 1) * BM, kv_len)  # past the block's last query position
        start = 0
        if WINDOW > 0:
            start = (tl.maximum(offset + block * BM - WINDOW + 1, 0) // BN) * BN
        for first in range(start, end, BN):
            n = first + tl.arange(0, BN)
            n_ok = n < kv_len
            kv_ok = n_ok[:, None] & d_ok[None, :]
            k = tl.load(k_ptr + n.to(tl.int64)[:, None] * k_row + kvh * k_head + d[None, :], mask=kv_ok, other=0.0)
            v = tl.load(v_ptr + n.to(tl.int64)[:, None] * v_row + kvh * v_head + d[None, :], mask=kv_ok, other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # [BM, BN]
            else:
                s = tl.dot(q, tl.trans(k)) * scale
            allowed = n_ok[None, :] & (n[None, :] <= query_pos[:, None])
            if WINDOW > 0:
                allowed = allowed & (n[None, :] > query_pos[:, None] - WINDOW)
            s = tl.where(allowed, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing allowed yet: no NaN
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m - m_safe)
            total = total * alpha + tl.sum(p, axis=1)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / tl.where(total > 0, total, 1.0)[:, None]  # 0 only on rows past q_len, which are not stored
        tl.store(out_ptr + rows.to(tl.int64)[:, None] * o_row + head * o_head + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])

    _built["kernel"] = forward
    return forward


def tiles(head_dim: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for a head size: the nearest row of TILES at or above it."""
    return TILES[64] if head_dim <= 64 else TILES[128]


def sink_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         sinks: torch.Tensor | None, window: int | None,
                         blocks: tuple[int, int] | None = None) -> torch.Tensor:
    """q [q, H, hd]: the last q positions of a context whose keys/values are k, v [L, KVH, hd]; sinks [H] or None;
    window: each query attends to the last `window` positions up to its own. -> [q, H, hd] in q's dtype.
    blocks: (BLOCK_M, BLOCK_N) instead of the table's (tests: several blocks on small shapes)."""
    import triton

    q_len, heads, head_dim = q.shape
    kv_len, kv_heads = k.shape[0], k.shape[1]
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    block_m, block_n, num_warps, num_stages = tiles(head_dim)
    if blocks is not None:
        block_m, block_n = blocks
    out = torch.empty_like(q)
    grid = (triton.cdiv(q_len, block_m), heads)
    _kernel()[grid](q, k, v, q if sinks is None else sinks, out, scale, q_len, kv_len, q.stride(0), q.stride(1),
                    k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
                    G=heads // kv_heads, D=head_dim, BD=max(triton.next_power_of_2(head_dim), 16), BM=block_m,
                    BN=block_n, WINDOW=window or 0, HAS_SINKS=sinks is not None, IEEE=q.dtype == torch.float32,
                    num_warps=num_warps, num_stages=num_stages)
    return out
