"""LFM2-MoE (model_type "lfm2_moe"; llama.cpp "lfm2moe"): a hybrid of short-conv layers (engine.model.short_conv: a
gated depthwise causal conv, its last inputs kept per sequence) and GQA layers with per-head q/k RMSNorm; the first
num_dense_layers layers have a dense SwiGLU MLP, the others routed experts chosen by sigmoid scores plus a per-expert
bias (engine.model.sigmoid_router). Plain RMSNorm everywhere; the final norm is named embedding_norm."""

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family
from engine.model.published_configs import LFM2_8B_A1B
from engine.model.renamed_weights import RenamedWeightNames
from engine.model.router_args import RouterArgs
from engine.model.short_conv_args import ShortConvArgs

MODEL_TYPE = "lfm2_moe"
LAYER_KINDS = ("conv", "full_attention")

WEIGHT_NAMES = RenamedWeightNames(
    block="feed_forward", router="gate", gate="w1", up="w3", down="w2",
    renames=(
        (".feed_forward.gate.expert_bias.weight", ".feed_forward.expert_bias"),
        (".mlp.gate_proj.", ".feed_forward.w1."), (".mlp.up_proj.", ".feed_forward.w3."),
        (".mlp.down_proj.", ".feed_forward.w2."),
        (".self_attn.o_proj.", ".self_attn.out_proj."), (".self_attn.q_norm.", ".self_attn.q_layernorm."),
        (".self_attn.k_norm.", ".self_attn.k_layernorm."),
        (".input_layernorm.", ".operator_norm."), (".post_attention_layernorm.", ".ffn_norm."),
        ("model.norm.", "model.embedding_norm."),
    ),
)


def layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    """The published layer_types, or full attention at full_attn_idxs (older configs) and short conv elsewhere."""
    types = config.get("layer_types")
    if types is None:
        full = set(require(config, "full_attn_idxs", list))
        return tuple(LAYER_KINDS[i in full] for i in range(num_layers))
    if not isinstance(types, list) or len(types) != num_layers or any(t not in LAYER_KINDS for t in types):
        raise ModelFormatError(f"config.json: 'layer_types' must list {num_layers} entries, each one of "
                               f"{', '.join(LAYER_KINDS)}")
    return tuple(types)


def read_config(config: dict) -> ModelArgs:
    if not config.get("use_expert_bias", True):
        raise UnsupportedModelError("config.json: use_expert_bias=false is not supported for lfm2_moe (Wisp's sigmoid "
                                    "router reads the expert bias every published LFM2-MoE checkpoint has)")
    num_layers, num_experts = require(config, "num_hidden_layers"), require(config, "num_experts")
    num_dense = config.get("num_dense_layers", 2)
    fields = common_args(config, num_experts, default_theta=1000000.0)
    fields.update(
        rms_norm_eps=float(first_present(config, "norm_eps", "rms_norm_eps", default=1e-5)),
        tie_word_embeddings=bool(first_present(config, "tie_word_embeddings", "tie_embedding", default=True)),
        moe_layers=tuple(i >= num_dense for i in range(num_layers)),
    )
    return ModelArgs(
        model_type=MODEL_TYPE,
        **fields,
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=config.get("intermediate_size") or 0,
        router=RouterArgs(norm_topk_prob=bool(config.get("norm_topk_prob", True)), kind="sigmoid_topk",
                          routed_scaling_factor=float(config.get("routed_scaling_factor") or 1.0)),
        attention=AttentionArgs(qk_norm="per_head"),
        layer_types=layer_types(config, num_layers),
        short_conv=ShortConvArgs(conv_kernel_dim=require(config, "conv_L_cache"),
                                 bias=bool(config.get("conv_bias", False))),
    )


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    examples=("LFM2-8B-A1B",),
    layers=("hybrid: gated short-conv layers and GQA (per-head q/k norm); dense first layers; sigmoid router with "
            "expert bias"),
    shapes={"lfm2-8b-a1b": LFM2_8B_A1B},
)
