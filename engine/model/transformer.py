"""The decoder stack shared by every supported MoE architecture. Expert weights live in a provider, not here:
the model runner hands one to every forward in a MoeContext."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from torch import nn

from engine.model import moe_tail_kernels
from engine.model.args import ModelArgs
from engine.model.attention import Attention, AttentionMetadata, KVCache
from engine.model.layers import DenseMLP, RMSNorm
from engine.model.mla_attention import MlaAttention
from engine.model.moe_tail_kernels import GatedShared
from engine.model.mrope import mrope_cos_sin
from engine.model.rope_layouts import ROTARY_EMBEDDINGS
from engine.model.routers import build_router
from engine.model.shared_experts import GatedSharedExpert, build_shared_experts

if TYPE_CHECKING:
    from engine.experts.provider import ExpertForward

RoutingObserver = Callable[[int, torch.Tensor], None]  # (layer, top-k ids [T, K])
RoutingOverride = Callable[[int], torch.Tensor]  # layer -> ids [T, K] to use instead of the router's


@dataclass(frozen=True)
class MoeContext:
    """What the MoE blocks use in one forward, handed in by the model runner: where the routed experts run (an
    expert provider, or its graphed path), and optional routing hooks (tests, trace-driven benchmarks)."""

    experts: "ExpertForward"
    observer: RoutingObserver | None = None
    override: RoutingOverride | None = None


class MoeBlock(nn.Module):
    """Router + routed experts (through the provider) + the optional shared experts. The gate computes the router
    logits, the router object (engine.model.routers, as ModelArgs.router.kind names it) picks experts and weights."""

    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.layer, self.args = layer, args
        self.gate, self.router = build_router(args)
        self.shared = build_shared_experts(args)

    def route(self, x: torch.Tensor, context: MoeContext, unscaled_shared: bool = False):
        """x [T, D] -> (ids [T, K], weights [T, K], shared experts' output or None). No host sync: graphable.
        unscaled_shared: a gated shared expert's output as GatedShared where moe_tail_kernels applies (the layer's
        finish scales and adds it in one kernel)."""
        logits = self.gate(x)  # [T, E]
        ids = context.override(self.layer) if context.override is not None else None  # trace-driven: ids only
        ids, weights = self.router.select(logits, ids)
        if self.shared is None:
            return ids, weights, None
        if unscaled_shared and isinstance(self.shared, GatedSharedExpert) and moe_tail_kernels.applies(x):
            return ids, weights, self.shared.unscaled(x)
        return ids, weights, self.shared(x)

    def routed(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, context: MoeContext) -> torch.Tensor:
        """The routed experts alone, through the context's provider (where paging happens)."""
        if context.observer is not None:
            context.observer(self.layer, ids)
        return context.experts.forward(self.layer, x, ids, weights)

    def experts(self, x, ids, weights, shared, context: MoeContext) -> torch.Tensor:
        """The routed experts through the context's provider (where paging happens), plus the shared experts."""
        out = self.routed(x, ids, weights, context)
        return out if shared is None else out + shared

    def forward(self, x: torch.Tensor, context: MoeContext) -> torch.Tensor:
        return self.experts(x, *self.route(x, context), context)


# ModelArgs.attention_kind -> the attention module of a decoder layer (its sliding window and sinks, per layer,
# are Attention's own settings)
ATTENTION_KINDS = {"attention": Attention, "latent_attention": MlaAttention}


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.self_attn = ATTENTION_KINDS[args.attention_kind](args, layer)
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps, args.norm_weight_fp32)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps, args.norm_weight_fp32)
        self.is_moe = args.moe_layers[layer]
        self.mlp = MoeBlock(args, layer) if self.is_moe else DenseMLP(args.hidden_size, args.intermediate_size)

    def forward(self, x, rope, meta: AttentionMetadata, cache: KVCache, context: MoeContext):
        x, h = self.post_attention_layernorm.add_forward(x, self.self_attn(self.input_layernorm(x), rope, meta, cache))
        return x + (self.mlp(h, context) if self.is_moe else self.mlp(h))

    def dense_part(self, x, rope, meta, cache, context: MoeContext):
        """Everything of a decode step's layer that needs no host: attention, norms, routing (or the whole
        layer if it has no experts). -> (x after attention, normed h, ids, weights, shared) or the layer's output."""
        attention = self.self_attn.forward_padded(self.input_layernorm(x), rope, meta, cache)
        x, h = self.post_attention_layernorm.add_forward(x, attention)
        if not self.is_moe:
            return x + self.mlp(h)
        return (x, h, *self.mlp.route(h, context))

    def finish(self, parts, context: MoeContext, out: torch.Tensor | None = None) -> torch.Tensor:
        """A MoE layer's dense_part output -> the layer's output (into out if given), its routed experts through
        the context's provider."""
        x, h, ids, weights, shared = parts
        if isinstance(shared, GatedShared):  # route(unscaled_shared=True): one kernel scales and adds
            return moe_tail_kernels.gated_residual_sum(x, self.mlp.routed(h, ids, weights, context), shared, out)
        return torch.add(x, self.mlp.experts(h, ids, weights, shared, context), out=out)


class MoeTransformer(nn.Module):
    """input ids of all scheduled tokens, flattened [T] -> final hidden states [T, D]."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.num_hidden_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps, args.norm_weight_fp32)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def attach_rotary(self, device) -> None:
        args = self.args
        rotary = ROTARY_EMBEDDINGS[args.attention.rope_layout]
        self.rotary = rotary(args.rotary_dim, args.rope_theta, args.rope_scaling).to(device)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata, cache: KVCache,
                context: MoeContext, images: tuple[torch.Tensor, torch.Tensor] | None = None):
        """positions [T], or [3, T] M-RoPE positions in a prompt step with images; images: (rows [R], embeddings
        [R, D]) that replace those rows' token embeddings, or [R, 1 + L, D]: the embeddings and the features added
        to those rows after each of the first L layers (deepstack; engine.vision)."""
        x = self.embed(input_ids)  # [T, D]
        deepstack = None
        if images is not None:
            rows, embeddings = images
            if embeddings.dim() == 3:
                embeddings, deepstack = embeddings[:, 0], embeddings[:, 1:]
            x = x.index_copy(0, rows, embeddings.to(x.dtype))
        if positions.dim() == 2:
            rope = mrope_cos_sin(self.rotary, positions, self.args.extra.get("mrope_section"), x.dtype)
        else:
            rope = self.rotary(positions, x.dtype)
        for index, layer in enumerate(self.layers):
            x = layer(x, rope, meta, cache, context)
            if deepstack is not None and index < deepstack.shape[1]:
                x = x.index_add(0, images[0], deepstack[:, index].to(x.dtype))
        return self.norm(x)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """input ids [T] -> the first layer's input [T, D]."""
        return self.embed_tokens(input_ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, D] -> fp32 logits [B, V] (computed in the weights' dtype, as transformers does; lm_head may be
        an engine.quant.quant_modules.QuantLinear)."""
        return self.lm_head(hidden).float()
