"""Multi-head latent attention (deepseek_v2, deepseek_v3) over the compressed paged KV cache.

Shapes: T new tokens, H heads, R kv_lora_rank, P qk_rope_head_dim, N qk_nope_head_dim, V v_head_dim, L context.
Each token leaves one row [R + P] in the cache (normed c_kv, rotated k_pe); every step rebuilds its context's
keys [L, H, N + P] and values [L, H, V] with kv_b_proj and attends with SDPA, as transformers does (so the same
numbers). The Triton decode (CUDA) instead folds kv_b_proj into the query and the output and reads the rows in
place (engine.model.mla_decode), for a verify step's rows too: each computes its position as a decode step does."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import AttentionMetadata, PaddedDecodeMetadata
from engine.model.latent_cache import LatentKVCache
from engine.model.layers import RMSNorm
from engine.model.mla_decode import absorb_output, absorb_query, latent_decode
from engine.model.rope_layouts import ROTATIONS

LORA_NORM_EPS = 1e-6  # q_a_layernorm and kv_a_layernorm keep RMSNorm's default eps, not rms_norm_eps


class MlaAttention(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.layer = layer
        self.decode_kernel = "sdpa"  # or "triton": decode reads the latent rows in place (set by the engine builder)
        mla, attention = args.mla, args.attention
        self.num_heads, self.rank, self.rope_dim = args.num_attention_heads, mla.kv_lora_rank, args.head_dim
        self.nope_dim, self.v_dim = mla.qk_nope_head_dim, mla.v_head_dim
        qk_dim = self.nope_dim + self.rope_dim
        self.scale = attention.attention_scale if attention.attention_scale is not None else qk_dim**-0.5
        self.rotate = ROTATIONS[attention.rope_layout]
        D, H, bias = args.hidden_size, self.num_heads, attention.attention_bias
        self.q_lora_rank = mla.q_lora_rank
        if mla.q_lora_rank:
            self.q_a_proj = nn.Linear(D, mla.q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(mla.q_lora_rank, LORA_NORM_EPS)
            self.q_b_proj = nn.Linear(mla.q_lora_rank, H * qk_dim, bias=False)
        else:
            self.q_proj = nn.Linear(D, H * qk_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(D, self.rank + self.rope_dim, bias=bias)
        self.kv_a_layernorm = RMSNorm(self.rank, LORA_NORM_EPS)
        self.kv_b_proj = nn.Linear(self.rank, H * (self.nope_dim + self.v_dim), bias=False)
        self.o_proj = nn.Linear(H * self.v_dim, D, bias=bias)

    def project(self, x: torch.Tensor, rope) -> tuple[torch.Tensor, torch.Tensor]:
        """x [T, D] -> queries [T, H, N + P] (RoPE part rotated) and cache rows [T, 1, R + P]."""
        T = x.shape[0]
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))) if self.q_lora_rank else self.q_proj(x)
        q_nope, q_pe = q.view(T, self.num_heads, -1).split([self.nope_dim, self.rope_dim], dim=-1)
        c_kv, k_pe = self.kv_a_proj_with_mqa(x).split([self.rank, self.rope_dim], dim=-1)  # [T, R], [T, P]
        c_kv = self.kv_a_layernorm(c_kv)
        q_pe, k_pe = self.rotate(q_pe, *rope), self.rotate(k_pe[:, None, :], *rope)
        return torch.cat((q_nope, q_pe), dim=-1), torch.cat((c_kv[:, None, :], k_pe), dim=-1)

    def expand(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cache rows [..., R + P] -> keys [..., H, N + P] and values [..., H, V]."""
        c_kv, k_pe = rows.split([self.rank, self.rope_dim], dim=-1)
        kv = self.kv_b_proj(c_kv).view(*rows.shape[:-1], self.num_heads, self.nope_dim + self.v_dim)
        k_nope, values = kv.split([self.nope_dim, self.v_dim], dim=-1)
        k_pe = k_pe[..., None, :].expand(*k_nope.shape[:-1], self.rope_dim)
        return torch.cat((k_nope, k_pe), dim=-1), values

    def forward(self, x, rope, meta: AttentionMetadata, cache: LatentKVCache) -> torch.Tensor:
        q, rows = self.project(x, rope)
        cache.store(self.layer, meta.slot_mapping, rows)
        pool = cache.latent[self.layer]
        out = q.new_empty(x.shape[0], self.num_heads, self.v_dim)  # [T, H, V]
        stepped = self.decode_kernel == "triton"
        decode = [span for span in meta.spans if span.is_decode and stepped]
        if decode:
            self.decode_rows(q, out, decode, pool)
        for span in meta.spans:
            if not (span.is_decode and stepped):
                at = slice(span.q_start, span.q_start + span.q_len)
                keys, values = self.expand(pool[span.kv_slots, 0])  # [L, H, N + P], [L, H, V]
                out[at] = self.attend(q[at], keys, values)
        return self.o_proj(out.view(x.shape[0], -1))

    def decode_rows(self, q, out, spans: list, pool: torch.Tensor) -> None:
        """The Triton decode of one-token and verify spans into out, each row one position as a decode step computes
        it. Absorbed for all their rows at once: in a decode step that is the same [B, H, *] products as static
        decode's, so the same bits."""
        rows = torch.tensor([row for span in spans for row in range(span.q_start, span.q_start + span.q_len)],
                            device=q.device)
        q_rows = absorb_query(q[rows], self.kv_b_proj.weight, self.nope_dim)  # [rows, H, R + P]
        latent, first = [], 0
        for span in spans:
            latent.append(latent_decode(q_rows[first : first + span.q_len], pool, *span.decode_index, self.rank,
                                        self.scale))
            first += span.q_len
        out[rows] = absorb_output(torch.cat(latent), self.kv_b_proj.weight, self.nope_dim)

    def forward_padded(self, x, rope, meta: PaddedDecodeMetadata, cache: LatentKVCache) -> torch.Tensor:
        """Decode for B sequences at once over contexts padded to a fixed length: no shape depends on data."""
        q, rows = self.project(x, rope)  # [B, H, N + P], [B, 1, R + P]
        cache.store(self.layer, meta.slot_mapping, rows)
        pool = cache.latent[self.layer]
        if self.decode_kernel == "triton":
            q_rows = absorb_query(q, self.kv_b_proj.weight, self.nope_dim)
            latent = latent_decode(q_rows, pool, meta.kv_index, meta.lengths, self.rank, self.scale)
            return self.o_proj(absorb_output(latent, self.kv_b_proj.weight, self.nope_dim).flatten(1))
        positions = torch.arange(meta.kv_index.shape[1], device=x.device)
        valid = positions[None, :] < meta.lengths[:, None]  # [B, L]
        # Padding reads slot 0, which may hold anything: zeroed so kv_b_proj cannot turn it into inf or NaN.
        context = torch.where(valid[..., None], pool[meta.kv_index, 0], 0)  # [B, L, R + P]
        keys, values = self.expand(context)  # [B, L, H, N + P], [B, L, H, V]
        o = F.scaled_dot_product_attention(q[:, :, None, :], keys.transpose(1, 2), values.transpose(1, 2),
                                           attn_mask=valid[:, None, None, :], scale=self.scale)  # [B, H, 1, V]
        return self.o_proj(o.reshape(x.shape[0], -1))

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """q [q, H, N + P] are the last q positions of a context whose keys/values are [L, H, *]. -> [q, H, V]."""
        q_len, kv_len = q.shape[0], keys.shape[0]
        mask, is_causal = None, q_len > 1 and q_len == kv_len
        if q_len > 1 and not is_causal:
            mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device).tril(diagonal=kv_len - q_len)
        o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys.transpose(0, 1)[None],
                                           values.transpose(0, 1)[None], attn_mask=mask, is_causal=is_causal,
                                           scale=self.scale)  # [1, H, q, V]
        return o[0].transpose(0, 1)
