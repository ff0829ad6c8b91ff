"""GLM-4.5 / GLM-4.5-Air (model_type "glm4_moe"; llama.cpp "glm4moe"): DeepSeek-V3-style routing (sigmoid scores,
correction bias, grouped top-k, shared experts, first dense layers), q/k/v biases, partial RoPE, optional per-head
q/k RMSNorm.

In GGUF files, as llama.cpp's converter (Glm4MoeModel) and graph (src/models/glm4-moe.cpp) have them:
- Metadata: the DeepSeek-style routing keys (expert_gating_func sigmoid, expert_weights_scale and _norm,
  expert_shared_count, leading_dense_block_count), partial RoPE as rope.dimension_count < head_dim, and
  nextn_predict_layers: block_count counts the multi-token-prediction layer at the end, which Wisp runs for
  --speculative mtp (engine.gguf.draft_layer) and otherwise leaves unread.
- Tensors: the norm before the MLP is blk.N.post_attention_norm; the router's correction bias is
  blk.N.exp_probs_b.bias; the shared expert is ffn_{gate,up,down}_shexp; q/k/v biases; leading dense layers hold
  ffn_{gate,up,down}."""

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present
from engine.model.attention_args import AttentionArgs
from engine.model.families.deepseek_config import deepseek_moe_fields
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.published_configs import GLM_45_AIR
from engine.model.mtp_names import NEXTN
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "glm4_moe", "glm4moe"
# What transformers' Glm4MoeConfig assumes for keys a config.json leaves out.
DEFAULTS = dict(n_group=1, topk_group=1, first_k_dense_replace=1, n_shared_experts=1, routed_scaling_factor=1.0,
                norm_topk_prob=True)
DEFAULT_PARTIAL_ROTARY_FACTOR = 0.5
SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
GGUF_LAYER_MODULES = {
    "post_attention_layernorm": "post_attention_norm",
    "mlp.shared.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared.shared_experts.down_proj": "ffn_down_shexp",
}


def read_config(config: dict) -> ModelArgs:
    moe = deepseek_moe_fields(config, "noaux_tc", DEFAULTS)
    common = common_args(config, moe["num_experts"], default_theta=10000.0)
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, **moe},
        attention=AttentionArgs(
            attention_bias=bool(config.get("attention_bias", False)),
            qk_norm="per_head" if config.get("use_qk_norm") else "none",
            partial_rotary_factor=float(first_present(rope, "partial_rotary_factor",
                                                      default=config.get("partial_rotary_factor",
                                                                         DEFAULT_PARTIAL_ROTARY_FACTOR)))),
    )


def gguf_layers(key: GgufKeys) -> int:
    """The layers Wisp runs: block_count less the trailing multi-token-prediction layers."""
    return key.integer("block_count") - key.integer("nextn_predict_layers", 0)


def read_gguf(key: GgufKeys) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata."""
    gating = key.integer("expert_gating_func", SIGMOID)
    if gating != SIGMOID:
        raise UnsupportedModelError(f"{key.path}: {ARCH}.expert_gating_func {gating}: GLM-4.5 routes with "
                                    f"sigmoid scores ({SIGMOID})")
    head_dim = key.integer("attention.key_length")
    config = {
        **config_basics(key),
        "num_hidden_layers": gguf_layers(key),
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": key.integer("attention.head_count_kv"),
        "head_dim": head_dim,
        "rope_theta": key.number("rope.freq_base", 10000.0),
        "n_routed_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "intermediate_size": key.integer("feed_forward_length"),
        "first_k_dense_replace": key.integer("leading_dense_block_count", 0),
        "n_group": key.integer("expert_group_count", 1),
        "topk_group": key.integer("expert_group_used_count", 1),
        "norm_topk_prob": bool(key.get("expert_weights_norm", False)),
        "routed_scaling_factor": key.number("expert_weights_scale", 1.0),
        "n_shared_experts": key.integer("expert_shared_count", 1),
        "attention_bias": key.has_tensor("blk.0.attn_q.bias"),
        "use_qk_norm": key.has_tensor("blk.0.attn_q_norm.weight"),
        "partial_rotary_factor": key.integer("rope.dimension_count", head_dim) / head_dim,
    }
    return read_config(config)


def check_convertible(args: ModelArgs) -> None:
    """llama.cpp's glm4moe graph picks the top-k over all experts: grouped routing that drops groups is refused."""
    router = args.router
    if router.topk_group < router.n_group:
        raise UnsupportedModelError(
            f"glm4_moe with n_group={router.n_group}, topk_group={router.topk_group}: llama.cpp's glm4moe graph "
            "does not limit the experts to the best groups, so its GGUF would compute a different model")


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    import gguf

    writer.add_leading_dense_block_count(args.moe_layers.index(True))
    router = args.router
    writer.add_expert_shared_count(args.shared_experts.n_shared_experts)
    writer.add_expert_weights_scale(router.routed_scaling_factor)
    writer.add_expert_weights_norm(router.norm_topk_prob)
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType(SIGMOID))
    if router.n_group > 1:
        writer.add_expert_group_count(router.n_group)
        writer.add_expert_group_used_count(router.topk_group)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    draft_layer=NEXTN,  # its multi-token-prediction layer, read for --speculative mtp/auto
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, layer_modules=GGUF_LAYER_MODULES,
                    check_convertible=check_convertible, write_metadata=write_gguf_metadata,
                    trailing_layers=True, nextn=True, module_order=True),
    examples=("GLM-4.5-Air", "GLM-4.5"),
    layers=(
        "GQA with q/k/v biases, partial RoPE, optional q/k norm; DeepSeek-V3-style grouped sigmoid router "
        "(fp32); ungated shared experts; dense first layers"),
    shapes={"glm-4.5-air": GLM_45_AIR},
)
