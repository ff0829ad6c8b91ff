"""MLA decode with kv_b_proj absorbed, so the Triton decode kernel reads the compressed cache rows in place.

Shapes: B sequences, H heads, R kv_lora_rank, P qk_rope_head_dim, N qk_nope_head_dim, V v_head_dim.
A score q_nope . k_nope + q_pe . k_pe equals (q_nope W_uk) . c_kv + q_pe . k_pe, where W_uk [H, N, R] is
kv_b_proj's key part; so the query becomes [q_nope W_uk, q_pe] [H, R + P] against rows [R + P] shared by every
head (multi-query attention with one KV head). The output softmax . c_kv [H, R] times W_uv [H, V, R] is the
values' output. The kernel (engine.model.decode_attention) takes the same rows as keys and values; the last P
columns of its output (softmax . k_pe) are dropped. Its reduction order depends only on positions, so the bits
do not depend on the batch, the padding or the expert mode."""

from __future__ import annotations

import torch

from engine.model.decode_attention import decode_attention


def absorb_query(q: torch.Tensor, kv_b_weight: torch.Tensor, nope_dim: int) -> torch.Tensor:
    """q [B, H, N + P]; kv_b_weight [H * (N + V), R] -> queries against the cache rows [B, H, R + P]."""
    H, rank = q.shape[1], kv_b_weight.shape[1]
    w_uk = kv_b_weight.view(H, -1, rank)[:, :nope_dim]  # [H, N, R]
    q_latent = torch.einsum("bhn,hnr->bhr", q[..., :nope_dim], w_uk)  # [B, H, R]
    return torch.cat((q_latent, q[..., nope_dim:]), dim=-1)


def absorb_output(out: torch.Tensor, kv_b_weight: torch.Tensor, nope_dim: int) -> torch.Tensor:
    """The kernel's output [B, H, R + P] -> the values' attention output [B, H, V]."""
    H, rank = out.shape[1], kv_b_weight.shape[1]
    w_uv = kv_b_weight.view(H, -1, rank)[:, nope_dim:]  # [H, V, R]
    return torch.einsum("bhr,hvr->bhv", out[..., :rank], w_uv)


def latent_decode(q_rows: torch.Tensor, pool: torch.Tensor, kv_index: torch.Tensor, lengths: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """q_rows [B, H, R + P] (absorb_query); pool [slots, 1, R + P]; kv_index [B, L]; lengths [B] -> [B, H, R + P]."""
    return decode_attention(q_rows, pool, pool, kv_index, lengths, scale)
