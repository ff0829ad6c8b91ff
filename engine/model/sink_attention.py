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

MAX_SCORE_ELEMENTS = 1 << 24  # one prefill chunk's [H, q, L] scores: 64 MiB in fp32


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
                    window: int | None) -> torch.Tensor:
    """q [q, H, hd]: the last q positions of a context whose keys/values are k, v [L, KVH, hd]. -> [q, H, hd]"""
    q_len, heads = q.shape[0], q.shape[1]
    kv_len, groups = k.shape[0], heads // k.shape[1]
    offset = kv_len - q_len  # position of query row 0
    rows = max(1, MAX_SCORE_ELEMENTS // (heads * kv_len))
    out = torch.empty_like(q)
    for start in range(0, q_len, rows):
        stop = min(q_len, start + rows)
        first_key = 0 if window is None else max(0, offset + start - window + 1)
        keys = k[first_key : offset + stop].transpose(0, 1).repeat_interleave(groups, dim=0)  # [H, n, hd]
        values = v[first_key : offset + stop].transpose(0, 1).repeat_interleave(groups, dim=0)
        query_pos = torch.arange(offset + start, offset + stop, device=q.device)[:, None]  # [c, 1]
        key_pos = torch.arange(first_key, offset + stop, device=q.device)[None, :]  # [1, n]
        allowed = key_pos <= query_pos
        if window is not None:
            allowed = allowed & (key_pos > query_pos - window)
        scores = torch.matmul(q[start:stop].transpose(0, 1), keys.transpose(1, 2)) * scale  # [H, c, n]
        probs = softmax_with_sinks(scores, allowed, sinks).to(values.dtype)
        out[start:stop] = torch.matmul(probs, values).transpose(0, 1)  # [c, H, hd]
    return out


def padded_eager_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor,
                           scale: float, sinks: torch.Tensor | None, window: int | None) -> torch.Tensor:
    """Decode with static shapes: q [B, H, hd]; keys, values [B, KVH, L, hd] padded past lengths [B]. -> [B, H, hd]"""
    groups = q.shape[1] // keys.shape[1]
    keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)  # [B, H, L, hd]
    positions = torch.arange(keys.shape[2], device=q.device)[None, :]  # [1, L]
    allowed = positions < lengths[:, None]
    if window is not None:
        allowed = allowed & (positions >= lengths[:, None] - window)
    scores = torch.matmul(q[:, :, None, :], keys.transpose(2, 3)) * scale  # [B, H, 1, L]
    probs = softmax_with_sinks(scores, allowed[:, None, None, :], sinks).to(values.dtype)
    return torch.matmul(probs, values)[:, :, 0]  # [B, H, hd]
