"""LFM2-MoE (model_type "lfm2_moe"; llama.cpp "lfm2moe"): a hybrid of short-conv layers (engine.model.short_conv: a
gated depthwise causal conv, its last inputs kept per sequence) and GQA layers with per-head q/k RMSNorm; the first
num_dense_layers layers have a dense SwiGLU MLP, the others routed experts chosen by sigmoid scores plus a per-expert
bias (engine.model.sigmoid_router). Plain RMSNorm everywhere; the final norm is named embedding_norm.

In GGUF files (llama.cpp's lfm2moe, src/models/lfm2moe.cpp and lfm2.cpp): head_count_kv per layer, 0 for a
short-conv layer; the conv layers' blk.N.shortconv.{in_proj,conv,out_proj} (the depthwise kernel [D, K], f32);
shortconv.l_cache; leading_dense_block_count; expert_gating_func sigmoid; the expert bias as blk.N.exp_probs_b.bias;
the final norm as token_embd_norm. llama.cpp's graph always renormalises the chosen weights and never scales them
(it reads no expert_weights_scale): checkpoints that set otherwise are refused by convert-gguf."""

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, require
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_checks import fixed_renormalisation
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.published_configs import LFM2_8B_A1B
from engine.model.renamed_weights import RenamedWeightNames
from engine.model.router_args import RouterArgs
from engine.model.short_conv_args import ShortConvArgs

MODEL_TYPE, ARCH = "lfm2_moe", "lfm2moe"
SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
GGUF_LAYER_MODULES = {"conv.in_proj": "shortconv.in_proj", "conv.conv": "shortconv.conv",
                      "conv.out_proj": "shortconv.out_proj"}
GGUF_LAYER_PARAMS = {"mlp.gate.expert_bias.weight": "exp_probs_b.bias"}
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


def read_gguf(key: GgufKeys) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata."""
    gating = key.integer("expert_gating_func")
    if gating != SIGMOID:
        raise UnsupportedModelError(f"{key.path}: {ARCH}.expert_gating_func {gating}: LFM2-MoE routes with sigmoid "
                                    f"scores ({SIGMOID})")
    scaling = key.get("rope.scaling.type")
    if scaling not in (None, "none"):
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{scaling}' ({ARCH}.rope.scaling.type) is not "
                                    "supported for lfm2_moe")
    layers = key.integer("block_count")
    kv_heads = key.get("attention.head_count_kv")
    if not isinstance(kv_heads, list) or len(kv_heads) != layers:
        raise UnsupportedModelError(f"{key.path}: {ARCH}.attention.head_count_kv must list the KV heads of each of "
                                    f"the {layers} layers (0 for a short-conv layer)")
    attention = sorted({heads for heads in kv_heads if heads})
    if len(attention) != 1:
        raise UnsupportedModelError(f"{key.path}: {ARCH}.attention.head_count_kv {kv_heads}: Wisp's attention "
                                    "layers share one number of KV heads")
    config = {
        **config_basics(key, eps="norm_eps"),
        "num_hidden_layers": layers,
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": attention[0],
        "head_dim": key.integer("attention.key_length"),
        "rope_theta": key.number("rope.freq_base", 1000000.0),
        "num_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "intermediate_size": key.integer("feed_forward_length"),
        "num_dense_layers": key.integer("leading_dense_block_count", 0),
        "layer_types": [LAYER_KINDS[bool(heads)] for heads in kv_heads],
        "conv_L_cache": key.integer("shortconv.l_cache"),
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.0,
    }
    return read_config(config)


def check_convertible(args: ModelArgs) -> None:
    """What llama.cpp's lfm2moe graph fixes: renormalised, unscaled top-k weights; no conv biases."""
    fixed_renormalisation(args, ARCH, True)
    if args.router.routed_scaling_factor != 1.0:
        raise UnsupportedModelError(f"{MODEL_TYPE} with routed_scaling_factor={args.router.routed_scaling_factor}: "
                                    f"llama.cpp's {ARCH} graph does not scale the router weights, so its GGUF would "
                                    "compute a different model")
    if args.short_conv.bias:
        raise UnsupportedModelError(f"{MODEL_TYPE} with conv_bias: llama.cpp's {ARCH} files have no conv biases")


def write_gguf_layer_keys(writer, args: ModelArgs) -> None:
    """head_count_kv per layer: 0 for a short-conv layer (llama.cpp's lfm2moe tells a recurrent layer by it)."""
    writer.add_feed_forward_length(args.intermediate_size or args.moe_intermediate_size)
    writer.add_head_count_kv([args.num_key_value_heads if kind == "full_attention" else 0
                              for kind in args.layer_types])
    writer.add_key_length(args.head_dim)
    writer.add_value_length(args.head_dim)
    writer.add_rope_dimension_count(args.head_dim)
    writer.add_rope_freq_base(args.rope_theta)


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    import gguf

    writer.add_shortconv_l_cache(args.short_conv.conv_kernel_dim)
    writer.add_leading_dense_block_count(args.moe_layers.index(True))
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType(SIGMOID))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, layer_modules=GGUF_LAYER_MODULES,
                    layer_params=GGUF_LAYER_PARAMS, global_params={"norm.weight": "token_embd_norm.weight"},
                    f32_tensors=("shortconv.conv",), check_convertible=check_convertible,
                    write_metadata=write_gguf_metadata, write_layer_keys=write_gguf_layer_keys, module_order=True),
    examples=("LFM2-8B-A1B",),
    layers=("hybrid: gated short-conv layers and GQA (per-head q/k norm); dense first layers; sigmoid router with "
            "expert bias"),
    shapes={"lfm2-8b-a1b": LFM2_8B_A1B},
)
