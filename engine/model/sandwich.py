"""The decoder stack of sandwich-norm MoE models (gemma4): embeddings scaled by sqrt(D); in every layer attention
and the feed-forward part each normed before and after; the feed-forward part a dense GELU MLP and the routed
experts side by side (each with its own norms, the router reading the layer's input), their sum normed again;
each layer's output times a learned scalar; logits soft-capped. Op for op as transformers' Gemma4TextModel.

Shapes: T tokens, D hidden size, K experts per token."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import AttentionMetadata, KVCache, PaddedDecodeMetadata
from engine.model.sandwich_attention import SandwichAttention
from engine.model.sandwich_layers import GeluGatedMLP, PowRMSNorm, SandwichRotary, ScaledRouter
from engine.model.transformer import MoeContext, MoeTransformer

# A layer's norms, as the checkpoint names them: around attention, then around the feed-forward part (the dense
# MLP's: pre_feedforward_layernorm and post_feedforward_layernorm_1; the experts': ..._2; their sum: the last)
NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm_1",
         "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2", "post_feedforward_layernorm")


class SandwichDecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.layer, self.is_moe = layer, True
        self.self_attn = SandwichAttention(args, layer)
        for name in NORMS:
            setattr(self, name, PowRMSNorm(args.hidden_size, args.rms_norm_eps))
        self.mlp = GeluGatedMLP(args.hidden_size, args.intermediate_size)
        self.router = ScaledRouter(args)
        self.layer_scalar = nn.Parameter(torch.ones(1))

    def forward(self, x, rope, meta: AttentionMetadata, cache: KVCache, context: MoeContext):
        return self.finish(self.parts(x, self.self_attn(self.input_layernorm(x), rope, meta, cache), context),
                           context)

    def dense_part(self, x, rope, meta: PaddedDecodeMetadata, cache: KVCache, context: MoeContext):
        """A padded decode step's layer up to its routed experts (engine.model.transformer.DecoderLayer.dense_part):
        -> (x after attention, the experts' normed input, ids, weights, the dense MLP's normed output)."""
        return self.parts(x, self.self_attn.forward_padded(self.input_layernorm(x), rope, meta, cache), context)

    def parts(self, x: torch.Tensor, attention: torch.Tensor, context: MoeContext):
        x = x + self.post_attention_layernorm(attention)  # [T, D]
        dense = self.post_feedforward_layernorm_1(self.mlp(self.pre_feedforward_layernorm(x)))
        ids, weights = self.router(x, context.override(self.layer) if context.override is not None else None)
        return x, self.pre_feedforward_layernorm_2(x), ids, weights, dense

    def finish(self, parts, context: MoeContext, out: torch.Tensor | None = None) -> torch.Tensor:
        """dense_part's output -> the layer's output (into out if given): the routed experts through the context's
        provider, normed and added to the dense MLP's output; that sum normed onto the residual, times the scalar."""
        x, h, ids, weights, dense = parts
        if context.observer is not None:
            context.observer(self.layer, ids)
        routed = self.post_feedforward_layernorm_2(context.experts.forward(self.layer, h, ids, weights))  # [T, D]
        x = x + self.post_feedforward_layernorm(dense + routed)
        return torch.mul(x, self.layer_scalar, out=out)


class SandwichTransformer(MoeTransformer):
    """input ids of all scheduled tokens, flattened [T] -> final hidden states [T, D]."""

    def __init__(self, args: ModelArgs):
        nn.Module.__init__(self)
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(SandwichDecoderLayer(args, i) for i in range(args.num_hidden_layers))
        self.norm = PowRMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def attach_rotary(self, device) -> None:
        self.rotary = SandwichRotary(self.args).to(device)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)  # [T, D]
        return x * torch.tensor(self.args.hidden_size**0.5).to(x.dtype)  # as transformers rounds the scale

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(hidden)  # [B, V]
        cap = self.args.sandwich.logit_softcap
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()
