"""GLM-4.7-Flash (model_type "glm4_moe_lite"): DeepSeek-V3's layers (transformers' modeling_glm4_moe_lite.py is
modeling_deepseek_v3.py but for the dense layers' list): multi-head latent attention with an optional q LoRA and RoPE
over interleaved pairs (rope_interleave), sigmoid routing with a correction bias over grouped top-k (noaux_tc, one
group as published), ungated shared experts; which layers are dense is mlp_layer_types ("dense" | "sparse"; the
first layer dense when the config has none: transformers reads no first_k_dense_replace). The multi-token-prediction
layer a checkpoint may carry (num_nextn_predict_layers) is not read.

In GGUF files (llama.cpp's deepseek2, the architecture its converter writes GLM-4.7-Flash as): the latent
attention as engine.model.families.mla_gguf has it (kv_b_proj split into attn_k_b and attn_v_b); the DeepSeek-style
routing keys (expert_gating_func sigmoid, expert_weights_scale and _norm, expert_shared_count,
leading_dense_block_count: the dense layers lead); the router's correction bias as blk.N.exp_probs_b.bias; the
shared expert as ffn_{gate,up,down}_shexp; nextn_predict_layers: block_count counts the multi-token-prediction layers
at the end, which Wisp does not run. deepseek2 is DeepSeek-V2's and V3's architecture too: this family reads the files
that route with sigmoid scores (expert_gating_func 2). llama.cpp's graph normalises q_a and kv_a with rms_norm_eps
where transformers (and Wisp) use 1e-6: a file of a checkpoint with another rms_norm_eps computes them apart."""

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, first_present, rope_params
from engine.model.families.deepseek_config import deepseek_moe_fields
from engine.model.families import mla_gguf
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.families.mla_config import mla_args
from engine.model.published_configs import GLM_47_FLASH
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "glm4_moe_lite", "deepseek2"
SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
GGUF_LAYER_MODULES = {
    **mla_gguf.LAYER_MODULES,
    "mlp.shared.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared.shared_experts.down_proj": "ffn_down_shexp",
}
# What transformers' Glm4MoeLiteConfig assumes for keys a config.json leaves out (first_k_dense_replace only feeds
# deepseek_moe_fields: mlp_layer_types decides).
DEFAULTS = dict(n_group=1, topk_group=1, n_shared_experts=1, routed_scaling_factor=1.8, norm_topk_prob=True,
                intermediate_size=10240, moe_intermediate_size=1536, kv_lora_rank=512, q_lora_rank=768,
                qk_rope_head_dim=64, v_head_dim=256, qk_nope_head_dim=192, rms_norm_eps=1e-5,
                first_k_dense_replace=1)
MLP_KINDS = ("dense", "sparse")


def moe_layers(config: dict, num_layers: int) -> tuple[bool, ...]:
    kinds = config.get("mlp_layer_types")
    if kinds is None:
        return tuple(i > 0 for i in range(num_layers))
    if not isinstance(kinds, list) or len(kinds) != num_layers or any(kind not in MLP_KINDS for kind in kinds):
        raise ModelFormatError(f"config.json: 'mlp_layer_types' must list {num_layers} entries, each 'dense' or "
                               "'sparse'")
    return tuple(kind == "sparse" for kind in kinds)


def read_config(config: dict) -> ModelArgs:
    config = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    if "q_lora_rank" in config and not config["q_lora_rank"]:
        config.pop("q_lora_rank")
    factor = first_present(rope_params(config), "partial_rotary_factor",
                           default=config.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise UnsupportedModelError(f"config.json: glm4_moe_lite with partial_rotary_factor={factor} is not "
                                    "supported (Wisp's latent attention turns the whole qk_rope_head_dim)")
    moe = deepseek_moe_fields(config, "noaux_tc", {})
    common = common_args(config, moe["num_experts"], default_theta=10000.0, scaling_types=("yarn",))
    layout = "interleaved" if config.get("rope_interleave", True) else "half"
    moe["moe_layers"] = moe_layers(config, common["num_hidden_layers"])
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, **moe, **mla_args(config, layout, common["rope_scaling"])},
    )


def reads_gguf(key: GgufKeys) -> bool:
    """A deepseek2 file that routes with sigmoid scores (DeepSeek-V2's route with softmax); without the key, as
    llama.cpp decides it: GLM-4.7-Flash's layer count and vocabulary."""
    gating = key.get("expert_gating_func")
    if gating is None:
        vocab = key.shape("token_embd.weight")[0] if key.has_tensor("token_embd.weight") else 0
        return key.get("block_count") in (47, 48) and vocab == GLM_47_FLASH["vocab_size"]
    return gating == SIGMOID


def read_gguf(key: GgufKeys) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata."""
    layers = key.integer("block_count") - key.integer("nextn_predict_layers", 0)
    dense = key.integer("leading_dense_block_count", 0)
    config = {
        **config_basics(key),
        "num_hidden_layers": layers,
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": key.integer("attention.head_count"),
        "rope_theta": key.number("rope.freq_base", 10000.0),
        "n_routed_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "intermediate_size": key.integer("feed_forward_length"),
        "mlp_layer_types": ["dense"] * dense + ["sparse"] * (layers - dense),
        "n_group": key.integer("expert_group_count", 1),
        "topk_group": key.integer("expert_group_used_count", 1),
        "norm_topk_prob": bool(key.get("expert_weights_norm", False)),
        "routed_scaling_factor": key.number("expert_weights_scale", 1.0),
        "n_shared_experts": key.integer("expert_shared_count"),
        **mla_gguf.mla_config(key),
    }
    return read_config(config)


def check_convertible(args: ModelArgs) -> None:
    """llama.cpp's deepseek2 graph: dense layers only before the first MoE layer, and mla_gguf's checks."""
    first = args.moe_layers.index(True)
    if not all(args.moe_layers[first:]):
        raise UnsupportedModelError(f"{MODEL_TYPE} with dense layers after the first sparse one: llama.cpp's {ARCH} "
                                    "files hold leading dense layers only (leading_dense_block_count)")
    mla_gguf.check_convertible(args, ARCH)


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    import gguf

    router = args.router
    writer.add_leading_dense_block_count(args.moe_layers.index(True))
    writer.add_expert_shared_count(args.shared_experts.n_shared_experts)
    writer.add_expert_weights_scale(router.routed_scaling_factor)
    writer.add_expert_weights_norm(router.norm_topk_prob)
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType(SIGMOID))
    writer.add_nextn_predict_layers(0)  # a checkpoint as transformers writes it holds no MTP layer
    if router.n_group > 1:
        writer.add_expert_group_count(router.n_group)
        writer.add_expert_group_used_count(router.topk_group)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, layer_modules=GGUF_LAYER_MODULES, joined=mla_gguf.JOINED,
                    check_convertible=check_convertible, write_metadata=write_gguf_metadata,
                    write_layer_keys=mla_gguf.write_layer_keys, trailing_layers=True,
                    module_order=True, reads=reads_gguf,
                    refusal="glm4_moe_lite reads the files that route with sigmoid scores (expert_gating_func 2)"),
    examples=("GLM-4.7-Flash",),
    layers=("multi-head latent attention, interleaved RoPE pairs; grouped sigmoid router (noaux_tc); ungated "
            "shared experts; dense first layer"),
    shapes={"glm-4.7-flash": GLM_47_FLASH},
)
