"""Attention with learned sinks and a sliding window (gpt-oss), written op for op as transformers'
eager_attention_forward for GptOss: scores, the additive mask, the sink logit as one more column, the row max
subtracted, softmax in the scores' dtype, the sink column dropped, then the values.

SDPA has neither sinks nor a per-layer window, so these layers run here for prefill and for decode wherever the
Triton kernel (engine.model.decode_attention, which has both) does not run. Prefill takes the queries in chunks,
so the [H, q, L] scores stay bounded however long the prompt; a sliding layer's chunk reads only the keys its
window reaches.

Shapes: q query rows, L context positions, H query heads, KVH KV heads, hd head size, B sequences."""

from __future__ import annotations

import torch
import torch.nn.functional as F

MAX_SCORE_ELEMENTS = 1 << 22  # one prefill chunk's [H, c, n] scores: 16 MiB in fp32, inside the plan's workspace


def query_rows(heads: int, kv_len: int, window: int | None) -> int:
    """Query rows per prefill chunk: a chunk of c rows reads up to kv_len keys, or c + window - 1 in a sliding
    layer, and its scores stay within MAX_SCORE_ELEMENTS."""
    rows = max(1, MAX_SCORE_ELEMENTS // (heads * kv_len))
    if window is not None:
        while 2 * rows <= kv_len and heads * 2 * rows * (2 * rows + window - 1) <= MAX_SCORE_ELEMENTS:
            rows *= 2
    return rows


def softmax_with_sinks(scores: torch.Tensor, allowed: torch.Tensor, sinks: torch.Tensor | None) -> torch.Tensor:
    """scores [..., H, q, L]; allowed broadcastable to it; sinks [H] -> probabilities [..., H, q, L]."""
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)  # as adding transformers' float mask
    if sinks is None:
        return F.softmax(scores, dim=-1, dtype=scores.dtype)
    sink = sinks.to(scores.dtype).reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)  # [..., H, q, 1]
    combined = torch.cat([scores, sink], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    return F.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, sinks: torch.Tensor | None,
                    window: int | None, image_ids: torch.Tensor | None = None) -> torch.Tensor:
    """q [q, H, hd]: the last q positions of a context whose keys/values are k, v [L, KVH, hd]. -> [q, H, hd].
    image_ids [L] (Gemma 4's images): the image of each position, -1 for text; a query also sees the later keys
    of its own image (transformers' blockwise overlay, inside the window's lower bound)."""
    q_len, heads, head_dim = q.shape
    kv_len, kv_heads = k.shape[0], k.shape[1]
    offset = kv_len - q_len  # position of query row 0
    rows = query_rows(heads, kv_len, window if image_ids is None else None)  # images: keys to the context's end
    out = torch.empty_like(q)
    for start in range(0, q_len, rows):
        stop = min(q_len, start + rows)
        first_key = 0 if window is None else max(0, offset + start - window + 1)
        last_key = offset + stop if image_ids is None else kv_len  # an image's later tokens are keys too
        keys = k[first_key:last_key].transpose(0, 1)  # [KVH, n, hd]
        values = v[first_key:last_key].transpose(0, 1)
        query_pos = torch.arange(offset + start, offset + stop, device=q.device)[:, None]  # [c, 1]
        key_pos = torch.arange(first_key, last_key, device=q.device)[None, :]  # [1, n]
        allowed = key_pos <= query_pos
        if image_ids is not None:
            query_image = image_ids[offset + start : offset + stop, None]  # [c, 1]
            allowed = allowed | ((image_ids[None, first_key:last_key] == query_image) & (query_image >= 0))
        if window is not None:
            allowed = allowed & (key_pos > query_pos - window)
        c, n = stop - start, keys.shape[1]
        grouped = q[start:stop].transpose(0, 1).reshape(kv_heads, -1, head_dim)  # [KVH, G*c, hd]: no K/V copies
        scores = (torch.matmul(grouped, keys.transpose(1, 2)) * scale).view(heads, c, n)  # [H, c, n]
        probs = softmax_with_sinks(scores, allowed, sinks).to(values.dtype).view(kv_heads, -1, n)  # [KVH, G*c, n]
        out[start:stop] = torch.matmul(probs, values).view(heads, c, head_dim).transpose(0, 1)  # [c, H, hd]
    return out


def padded_eager_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor,
                           scale: float, sinks: torch.Tensor | None, window: int | None) -> torch.Tensor:
    """Decode with static shapes: q [B, H, hd]; keys, values [B, KVH, L, hd] padded past lengths [B]. -> [B, H, hd]"""
    B, heads, head_dim = q.shape
    kv_heads, L = keys.shape[1], keys.shape[2]
    positions = torch.arange(L, device=q.device)[None, :]  # [1, L]
    allowed = positions < lengths[:, None]
    if window is not None:
        allowed = allowed & (positions >= lengths[:, None] - window)
    grouped = q.view(B, kv_heads, -1, head_dim)  # [B, KVH, G, hd]: the query heads of each KV head, no K/V copies
    scores = (torch.matmul(grouped, keys.transpose(2, 3)) * scale).view(B, heads, 1, L)
    probs = softmax_with_sinks(scores, allowed[:, None, None, :], sinks).to(values.dtype)
    return torch.matmul(probs.view(B, kv_heads, -1, L), values).view(B, heads, head_dim)
