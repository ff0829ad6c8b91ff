"""A checkpoint's multi-token-prediction (draft) layer: from the model's final hidden state at position q and the
embedding of the token at q+1 it computes a hidden state whose logits predict the token at q+2. Drafting chains it:
its own output stands in for the model's hidden state at the next position (engine.generation.speculative.mtp).

Shape legend: T positions, D hidden, V vocabulary."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import AttentionMetadata, KVCache, PaddedDecodeMetadata
from engine.model.hybrid import HybridDecoderLayer
from engine.model.hybrid_layers import centred_norm
from engine.model.layers import RMSNorm
from engine.model.mtp_names import DraftLayerNames, draft_layer_args
from engine.model.transformer import DecoderLayer, MoeContext, MoeTransformer


def add_draft_pool(cache: KVCache) -> None:
    """One more attention layer in every pool of the paged KV cache (so re-splits resize it with the others)."""
    for pool in cache.pools():
        pool.append(torch.zeros_like(pool[0]))


class DraftLayer(nn.Module):
    """mtp (Qwen3-Next, Qwen3.5): centred norms, fc, the decoder layer, norm; the normed output is both what the
    next draft step reads and what the head reads. nextn (DeepSeek-V3, GLM-4.5): enorm, hnorm, eh_proj, the decoder
    layer, shared_head.norm; the next draft step reads the decoder layer's output before that norm, and the
    embedding at position 0 is zeroed. `has_head`: the file holds the layer's own output head (nextn)."""

    def __init__(self, args: ModelArgs, names: DraftLayerNames, has_head: bool = False):
        super().__init__()
        D, layer_args, index = args.hidden_size, draft_layer_args(args), args.num_hidden_layers
        self.style = names.style
        if args.is_hybrid:
            self.embed_norm, self.hidden_norm, self.norm = (centred_norm(args, D) for _ in range(3))
            self.layer = HybridDecoderLayer(layer_args, index)
        else:
            self.embed_norm, self.hidden_norm, self.norm = (RMSNorm(D, args.rms_norm_eps) for _ in range(3))
            self.layer = DecoderLayer(layer_args, index)
        self.proj = nn.Linear(2 * D, D, bias=False)
        self.head = nn.Linear(D, args.vocab_size, bias=False) if has_head else None

    def forward(self, embeds: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor, rope,
                meta: AttentionMetadata, cache: KVCache, context: MoeContext) -> tuple[torch.Tensor, torch.Tensor]:
        """embeds [T, D] of the tokens at q+1, hidden [T, D] at q, positions [T] (q) -> (what the next draft step
        reads as its hidden [T, D], what the head reads [T, D])."""
        x = self.layer(self.project(embeds, hidden, positions), rope, meta, cache, context)
        return self.outputs(x)

    def forward_padded(self, embeds: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor, rope,
                       meta: PaddedDecodeMetadata, cache: KVCache,
                       context: MoeContext) -> tuple[torch.Tensor, torch.Tensor]:
        """One new position per row with static shapes (a CUDA graph: engine.generation.speculative.draft_graphs):
        the decoder layer's padded decode step, its dense part then its experts; the same math as forward."""
        parts = self.layer.dense_part(self.project(embeds, hidden, positions), rope, meta, cache, context)
        return self.outputs(self.layer.finish(parts, context))

    def project(self, embeds: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.style == "nextn":
            embeds = embeds.masked_fill((positions == 0)[:, None], 0.0)
        return self.proj(torch.cat([self.embed_norm(embeds), self.hidden_norm(hidden)], dim=-1))  # [T, D]

    def outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        normed = self.norm(x)
        return (normed if self.style == "mtp" else x), normed


class DraftExperts:
    """The draft layer's routed experts, resident on the device: the layer runs every drafting step, so a miss
    there would stall every step; its bytes are planned beside the dense weights (engine.model.mtp_sizes)."""

    def __init__(self, layout, blocks: torch.Tensor):
        self.layout, self.blocks = layout, blocks  # blocks [E, numel]

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.layout.run_blocks(x, ids, weights, self.blocks)


class DraftModel:
    """The draft layer with what it shares with the model (embedding, rotary, lm_head) and the KV cache."""

    def __init__(self, layer: DraftLayer, experts: DraftExperts, model: MoeTransformer, cache: KVCache):
        self.layer, self.experts, self.model, self.cache = layer, experts, model, cache
        self.context = MoeContext(experts)

    def forward(self, token_ids: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor,
                meta: AttentionMetadata) -> tuple[torch.Tensor, torch.Tensor]:
        """token_ids [T] (at q+1), hidden [T, D] (at q), positions [T] -> (chained hidden [T, D], head input)."""
        embeds = self.model.embed_tokens(token_ids)  # [T, D]
        rope = self.model.rotary(positions, embeds.dtype)
        return self.layer(embeds, hidden, positions, rope, meta, self.cache, self.context)

    def forward_padded(self, token_ids: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor,
                       meta: PaddedDecodeMetadata) -> tuple[torch.Tensor, torch.Tensor]:
        """forward with static shapes: one new position per row, its context read through meta.kv_index."""
        embeds = self.model.embed_tokens(token_ids)  # [B, D]
        rope = self.model.rotary(positions, embeds.dtype)
        return self.layer.forward_padded(embeds, hidden, positions, rope, meta, self.cache, self.context)

    def logits(self, head_input: torch.Tensor) -> torch.Tensor:
        """[R, D] -> fp32 logits [R, V]."""
        head = self.layer.head if self.layer.head is not None else self.model.lm_head
        return head(head_input).float()
