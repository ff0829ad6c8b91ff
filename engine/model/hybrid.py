"""The decoder stack of the hybrid linear-attention MoE models (qwen3_next, qwen3_5_moe): most layers mix tokens
with Gated DeltaNet (a state per sequence), every few a gated full attention (paged KV); every layer's MLP is the
MoE block with a gated shared expert. Norms are zero-centred."""

from __future__ import annotations

from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import AttentionMetadata, PaddedDecodeMetadata
from engine.model.hybrid_layers import GatedAttention, GatedDeltaNet, centred_norm
from engine.model.layers import DenseMLP
from engine.model.state_cache import HybridCache
from engine.model.transformer import MoeBlock, MoeContext, MoeTransformer


def cache_index(args: ModelArgs, layer: int) -> int:
    """A layer's index among the layers of its own kind: the KV cache's for full attention, the state cache's
    for linear attention."""
    layer_types = args.attention.layer_types
    return sum(kind == layer_types[layer] for kind in layer_types[:layer])


class HybridDecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.is_linear = args.attention.layer_types[layer] == "linear_attention"
        if self.is_linear:
            self.linear_attn = GatedDeltaNet(args, cache_index(args, layer))
        else:
            self.self_attn = GatedAttention(args, cache_index(args, layer))
        self.input_layernorm = centred_norm(args, args.hidden_size)
        self.post_attention_layernorm = centred_norm(args, args.hidden_size)
        self.is_moe = args.moe_layers[layer]
        self.mlp = MoeBlock(args, layer) if self.is_moe else DenseMLP(args.hidden_size, args.intermediate_size)

    def forward(self, x, rope, meta: AttentionMetadata, cache: HybridCache, context: MoeContext):
        h = self.input_layernorm(x)
        x = x + (self.linear_attn(h, meta, cache) if self.is_linear else self.self_attn(h, rope, meta, cache))
        h = self.post_attention_layernorm(x)
        return x + (self.mlp(h, context) if self.is_moe else self.mlp(h))

    def dense_part(self, x, rope, meta: PaddedDecodeMetadata, cache: HybridCache, context: MoeContext):
        """A padded decode step's layer up to its routed experts (engine.model.transformer.DecoderLayer.dense_part):
        -> (x after the token mixer, normed h, ids, weights, shared) or the layer's output."""
        h = self.input_layernorm(x)
        if self.is_linear:
            x = x + self.linear_attn.forward_padded(h, meta, cache)
        else:
            x = x + self.self_attn.forward_padded(h, rope, meta, cache)
        h = self.post_attention_layernorm(x)
        if not self.is_moe:
            return x + self.mlp(h)
        return (x, h, *self.mlp.route(h, context))


class HybridTransformer(MoeTransformer):
    """input ids of all scheduled tokens, flattened [T] -> final hidden states [T, D]. In a padded decode step
    (engine.runtime.decode_graphs) the linear layers read and write each sequence's state at the slot the step's
    metadata holds on the device."""

    def __init__(self, args: ModelArgs):
        nn.Module.__init__(self)
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(HybridDecoderLayer(args, i) for i in range(args.num_hidden_layers))
        self.norm = centred_norm(args, args.hidden_size)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)
