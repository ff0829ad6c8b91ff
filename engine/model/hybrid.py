"""The decoder stack of the hybrid MoE models: each layer's token mixer is the one its layer type names in MIXERS,
either a state mixer (engine.model.state_mixer: Gated DeltaNet, short conv, Mamba-2; a state per sequence) or
attention (paged KV); then its MLP, the MoE block or a dense one. The Gated DeltaNet models' norms are zero-centred,
the others' plain RMSNorm."""

from __future__ import annotations

from torch import nn

from engine.model.args import ModelArgs
from engine.model.attention import Attention, AttentionMetadata, PaddedDecodeMetadata
from engine.model.hybrid_layers import GatedAttention, GatedDeltaNet, UnrotatedAttention, centred_norm
from engine.model.latent_moe import LatentMoeBlock, Relu2MLP
from engine.model.layers import DenseMLP, RMSNorm
from engine.model.mamba2_mixer import Mamba2Mixer
from engine.model.short_conv import ShortConv
from engine.model.state_cache import HybridCache
from engine.model.state_layers import is_block_stack, is_state_layer
from engine.model.transformer import DecoderLayer, MoeBlock, MoeContext, MoeTransformer


def attention_mixer(args: ModelArgs, kv_layer: int) -> Attention:
    """Gated full attention (qwen3_next, qwen3_5_moe), GQA with no RoPE (rotary_dim 0: nemotron_h), or GQA with
    the config's q/k norm."""
    if args.attention.attention_output_gate:
        return GatedAttention(args, kv_layer)
    return UnrotatedAttention(args, kv_layer) if args.rotary_dim == 0 else Attention(args, kv_layer)


# ModelArgs.layer_types value -> (the decoder layer's attribute for it, its builder(args, index among the layers of
# its cache: the state layers' or the attention layers'))
MIXERS = {
    "linear_attention": ("linear_attn", GatedDeltaNet),
    "conv": ("conv", ShortConv),
    "mamba": ("mixer", Mamba2Mixer),
    "full_attention": ("self_attn", attention_mixer),
}


def cache_index(args: ModelArgs, layer: int) -> int:
    """A layer's index among the layers that share its cache: the state cache's for a state layer, the KV cache's
    for attention."""
    is_state = is_state_layer(args.layer_types[layer])
    return sum(is_state_layer(kind) == is_state for kind in args.layer_types[:layer] if kind in MIXERS)


def layer_norm(args: ModelArgs, size: int) -> nn.Module:
    if args.linear is not None:
        return centred_norm(args, size)
    return RMSNorm(size, args.rms_norm_eps, weight_fp32=is_block_stack(args.layer_types))


class HybridDecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        kind = args.layer_types[layer]
        if kind not in MIXERS:
            raise ValueError(f"unknown hybrid layer type '{kind}' (known: {', '.join(MIXERS)})")
        self.is_linear = is_state_layer(kind)  # a state per sequence (engine.runtime.decode_graphs reads it)
        self.mixer_name, build = MIXERS[kind]
        setattr(self, self.mixer_name, build(args, cache_index(args, layer)))
        self.input_layernorm = layer_norm(args, args.hidden_size)
        self.post_attention_layernorm = layer_norm(args, args.hidden_size)
        self.is_moe = args.moe_layers[layer]
        self.mlp = MoeBlock(args, layer) if self.is_moe else DenseMLP(args.hidden_size, args.intermediate_size)

    def mix(self, h, rope, meta, cache: HybridCache, padded: bool):
        mixer = getattr(self, self.mixer_name)
        run = mixer.forward_padded if padded else mixer
        return run(h, meta, cache) if self.is_linear else run(h, rope, meta, cache)

    def forward(self, x, rope, meta: AttentionMetadata, cache: HybridCache, context: MoeContext):
        x, h = self.post_attention_layernorm.add_forward(x, self.mix(self.input_layernorm(x), rope, meta, cache,
                                                                     padded=False))
        if not self.is_moe:
            return x + self.mlp(h)
        return self.finish((x, h, *self.mlp.route(h, context, unscaled_shared=True)), context)

    def dense_part(self, x, rope, meta: PaddedDecodeMetadata, cache: HybridCache, context: MoeContext):
        """A padded decode step's layer up to its routed experts (engine.model.transformer.DecoderLayer.dense_part):
        -> (x after the token mixer, normed h, ids, weights, shared) or the layer's output."""
        x, h = self.post_attention_layernorm.add_forward(x, self.mix(self.input_layernorm(x), rope, meta, cache,
                                                                     padded=True))
        if not self.is_moe:
            return x + self.mlp(h)
        return (x, h, *self.mlp.route(h, context, unscaled_shared=True))

    finish = DecoderLayer.finish


class BlockLayer(nn.Module):
    """One block per layer (nemotron_h): x + block(norm(x)), the block a token mixer (MIXERS), the latent MoE block
    ("moe") or a dense ReLU² MLP ("mlp"). The norm multiplies by its weight in fp32."""

    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        kind = args.layer_types[layer]
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps, weight_fp32=True)
        self.is_linear, self.is_moe = is_state_layer(kind), args.moe_layers[layer]
        self.mixer_name = MIXERS[kind][0] if kind in MIXERS else None
        if self.mixer_name is not None:
            setattr(self, self.mixer_name, MIXERS[kind][1](args, cache_index(args, layer)))
        elif self.is_moe:
            self.mlp = LatentMoeBlock(args, layer, args.shared_experts.shared_expert_intermediate_size)
        else:
            self.mlp = Relu2MLP(args.hidden_size, args.intermediate_size)

    def block(self, h, rope, meta, cache: HybridCache, context: MoeContext, padded: bool):
        if self.mixer_name is None:
            return self.mlp(h, context) if self.is_moe else self.mlp(h)
        mixer = getattr(self, self.mixer_name)
        run = mixer.forward_padded if padded else mixer
        return run(h, meta, cache) if self.is_linear else run(h, rope, meta, cache)

    def forward(self, x, rope, meta: AttentionMetadata, cache: HybridCache, context: MoeContext):
        return x + self.block(self.norm(x), rope, meta, cache, context, padded=False)

    finish = DecoderLayer.finish

    def dense_part(self, x, rope, meta: PaddedDecodeMetadata, cache: HybridCache, context: MoeContext):
        """As HybridDecoderLayer.dense_part: an MoE layer stops at its routed experts -> (x, normed h, ids, weights,
        shared); any other layer -> its output."""
        h = self.norm(x)
        if self.is_moe:
            return (x, h, *self.mlp.route(h, context))
        return x + self.block(h, rope, meta, cache, context, padded=True)


class HybridTransformer(MoeTransformer):
    """input ids of all scheduled tokens, flattened [T] -> final hidden states [T, D]. In a padded decode step
    (engine.runtime.decode_graphs) the state layers read and write each sequence's state at the slot the step's
    metadata holds on the device."""

    def __init__(self, args: ModelArgs):
        nn.Module.__init__(self)
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        layer_class = BlockLayer if is_block_stack(args.layer_types) else HybridDecoderLayer
        self.layers = nn.ModuleList(layer_class(args, i) for i in range(args.num_hidden_layers))
        self.norm = layer_norm(args, args.hidden_size)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)
