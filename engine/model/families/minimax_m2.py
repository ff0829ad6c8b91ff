"""MiniMax-M2 (model_type "minimax_m2"): GQA with an RMSNorm over the whole q and k projections (not per head) and
partial RoPE (rotary_dim of each head, rotate_half); every layer MoE, 256 experts top-8 as published; a sigmoid
router whose choice adds a per-expert correction bias (block_sparse_moe.e_score_correction_bias) and whose chosen
scores are renormalised, unscaled: DeepSeek-V3-style routing with one group (engine.model.routers' "grouped",
noaux_tc), which computes it op for op from an fp32 gate (transformers' MiniMaxM2TopKRouter multiplies in the
model's dtype: the same bits in fp32). Mixtral's expert names (w1, w3, w2). As transformers' modeling_minimax_m2.py
computes it: config.json's use_qk_norm, scoring_func and use_routing_bias are read by neither.

In GGUF files (llama.cpp's minimax-m2, src/models/minimax-m2.cpp): NEOX RoPE over rope.dimension_count channels of
each head, q/k norms over the full projections (attn_q_norm, attn_k_norm), the correction bias as
blk.N.exp_probs_b.bias, expert_gating_func sigmoid; the chosen weights are always renormalised and never scaled."""

from dataclasses import dataclass

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require, rope_params
from engine.model.attention_args import AttentionArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.router_args import RouterArgs
from engine.model.weight_names import MoeWeightNames

MODEL_TYPE, ARCH = "minimax_m2", "minimax-m2"
SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
# What transformers' MiniMaxM2Config assumes for keys a config.json leaves out.
DEFAULTS = dict(head_dim=128, num_local_experts=256, num_experts_per_tok=8, intermediate_size=1536,
                rms_norm_eps=1e-6, tie_word_embeddings=False)


@dataclass(frozen=True)
class MiniMaxWeightNames(MoeWeightNames):
    """Mixtral's names, with the router's correction bias in the MoE block rather than in its gate."""

    def checkpoint_name(self, param: str) -> str:
        return super().checkpoint_name(param).replace(".block_sparse_moe.gate.e_score_correction_bias",
                                                      ".block_sparse_moe.e_score_correction_bias")


WEIGHT_NAMES = MiniMaxWeightNames(block="block_sparse_moe", router="gate", gate="w1", up="w3", down="w2")


def partial_rotary_factor(config: dict, head_dim: int) -> float:
    """rope_parameters' partial_rotary_factor, or the published rotary_dim over head_dim."""
    factor = rope_params(config).get("partial_rotary_factor", config.get("partial_rotary_factor"))
    if factor is None:
        factor = config.get("rotary_dim", head_dim) / head_dim
    rotary_dim = int(head_dim * factor)
    if not 0 < rotary_dim <= head_dim or rotary_dim % 2:
        raise ModelFormatError(f"config.json: the rotary part of a head ({rotary_dim} of head_dim={head_dim}) must "
                               "be even and at most head_dim")
    return float(factor)


def read_config(config: dict) -> ModelArgs:
    config = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    num_experts = require(config, "num_local_experts")
    common = common_args(config, num_experts, default_theta=5000000.0)
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, "moe_layers": (True,) * common["num_hidden_layers"]},
        moe_intermediate_size=require(config, "intermediate_size"),
        intermediate_size=0,
        router=RouterArgs(norm_topk_prob=True, kind="grouped", topk_method="noaux_tc"),
        attention=AttentionArgs(qk_norm="full",
                                partial_rotary_factor=partial_rotary_factor(config, common["head_dim"])),
    )


def read_gguf(key: GgufKeys) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata."""
    gating = key.integer("expert_gating_func", SIGMOID)
    if gating != SIGMOID:
        raise UnsupportedModelError(f"{key.path}: {ARCH}.expert_gating_func {gating}: MiniMax-M2 routes with "
                                    f"sigmoid scores ({SIGMOID})")
    scaling = key.get("rope.scaling.type")
    if scaling not in (None, "none"):
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{scaling}' ({ARCH}.rope.scaling.type) is not "
                                    "supported for minimax_m2")
    head_dim = key.integer("attention.key_length")
    if key.integer("attention.value_length", head_dim) != head_dim:
        raise UnsupportedModelError(f"{key.path}: key_length != value_length: Wisp's attention needs them equal")
    config = {
        **config_basics(key),
        "num_hidden_layers": key.integer("block_count"),
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": key.integer("attention.head_count_kv"),
        "head_dim": head_dim,
        "rotary_dim": key.integer("rope.dimension_count", head_dim),
        "rope_theta": key.number("rope.freq_base", 5000000.0),
        "num_local_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "intermediate_size": key.integer("expert_feed_forward_length"),
    }
    return read_config(config)


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    import gguf

    writer.add_expert_gating_func(gguf.ExpertGatingFuncType(SIGMOID))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, write_metadata=write_gguf_metadata, module_order=True),
    examples=("MiniMax-M2", "MiniMax-M2.1"),
    layers=("GQA with q/k norm over the full projection, partial RoPE; sigmoid router with a correction bias, "
            "renormalised top-k (fp32)"),
)
