"""ERNIE 4.5 MoE (model_type "ernie4_5_moe"): GQA with RoPE over interleaved pairs (x0, x1), (x2, x3), ...; MoE
layers from moe_layer_start_index to moe_layer_end_index, every moe_layer_interval-th (dense MLPs elsewhere); a
softmax router whose choice adds a per-expert correction bias (the checkpoint's moe_statics) and whose top-k
probabilities are renormalised over a sum floored at moe_norm_min (engine.model.biased_softmax_router); ungated
shared experts (moe_num_shared_experts x moe_intermediate_size). As transformers' modeling_ernie4_5_moe.py computes it.
Biases on the linear layers (use_bias) are refused; the multi-token-prediction layers a checkpoint may carry are not
read.

In GGUF files (llama.cpp's ernie4_5-moe, src/models/ernie4-5-moe.cpp): RoPE over adjacent pairs (llama.cpp's NORM
type, the checkpoint's own q/k rows); MoE from leading_dense_block_count on, every interleave_moe_layer_step-th layer
(llama.cpp's loader expects experts in every layer past the dense ones, so only a step of 1 converts); the shared
experts as ffn_{gate,up,down}_shexp (expert_shared_feed_forward_length: all of them as one MLP); the correction
bias as exp_probs_b; the router is always softmax, its chosen weights always renormalised (llama.cpp floors the sum
at 2^-14 rather than moe_norm_min, which a softmax's top-k sum never comes near)."""

from dataclasses import dataclass

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require
from engine.model.attention_args import AttentionArgs
from engine.model.biased_softmax_args import BiasedSoftmaxArgs
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.published_configs import ERNIE_45_21B_A3B
from engine.model.router_args import RouterArgs
from engine.model.shared_expert_args import SharedExpertArgs
from engine.model.weight_names import MoeWeightNames

MODEL_TYPE, ARCH = "ernie4_5_moe", "ernie4_5-moe"
# What transformers' Ernie4_5_MoeConfig assumes for keys a config.json leaves out.
DEFAULTS = dict(moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=1, moe_num_shared_experts=2,
                moe_norm_min=1e-12, use_bias=False, tie_word_embeddings=True, rms_norm_eps=1e-5)


@dataclass(frozen=True)
class ErnieWeightNames(MoeWeightNames):
    """Qwen's names, with the router's correction bias beside the gate in moe_statics."""

    def checkpoint_name(self, param: str) -> str:
        return super().checkpoint_name(param).replace(".mlp.gate.e_score_correction_bias",
                                                      ".mlp.moe_statics.e_score_correction_bias")


WEIGHT_NAMES = ErnieWeightNames(block="mlp", router="gate", gate="gate_proj", up="up_proj", down="down_proj")


def moe_layers(config: dict, num_layers: int) -> tuple[bool, ...]:
    """Every moe_layer_interval-th layer from moe_layer_start_index to moe_layer_end_index (-1: the last)."""
    start, end = require(config, "moe_layer_start_index"), require(config, "moe_layer_end_index")
    interval = require(config, "moe_layer_interval")
    if interval < 1:
        raise ModelFormatError(f"config.json: moe_layer_interval={interval} must be at least 1")
    end = num_layers - 1 if end == -1 else end
    return tuple((i + 1) % interval == 0 and start <= i <= end for i in range(num_layers))


def read_config(config: dict) -> ModelArgs:
    config = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    if config["use_bias"]:
        raise UnsupportedModelError("config.json: ernie4_5_moe with use_bias (biases on the linear layers) is not "
                                    "supported")
    num_experts = require(config, "moe_num_experts")
    config["num_experts_per_tok"] = require(config, "moe_k")
    common = common_args(config, num_experts, default_theta=500000.0)
    return ModelArgs(
        model_type=MODEL_TYPE,
        **{**common, "moe_layers": moe_layers(config, common["num_hidden_layers"])},
        moe_intermediate_size=require(config, "moe_intermediate_size"),
        intermediate_size=require(config, "intermediate_size"),
        router=RouterArgs(norm_topk_prob=True, kind="biased_softmax_topk"),
        shared_experts=SharedExpertArgs(n_shared_experts=require(config, "moe_num_shared_experts")),
        biased_softmax=BiasedSoftmaxArgs(norm_min=float(require(config, "moe_norm_min", float))),
        attention=AttentionArgs(rope_layout="interleaved"),
    )


GGUF_LAYER_MODULES = {f"mlp.shared.shared_experts.{projection}_proj": f"ffn_{projection}_shexp"
                      for projection in ("gate", "up", "down")}


def read_gguf(key: GgufKeys) -> ModelArgs:
    """ModelArgs through the same config reader as a Hugging Face folder, from the file's metadata."""
    scaling = key.get("rope.scaling.type")
    if scaling not in (None, "none"):
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{scaling}' ({ARCH}.rope.scaling.type) is not "
                                    "supported for ernie4_5_moe")
    hidden, heads = key.integer("embedding_length"), key.integer("attention.head_count")
    head_dim = key.integer("attention.key_length", hidden // heads)
    if key.integer("attention.value_length", head_dim) != head_dim or key.integer("rope.dimension_count",
                                                                                 head_dim) != head_dim:
        raise UnsupportedModelError(f"{key.path}: ernie4_5-moe with key, value and rotary lengths apart is not "
                                    "supported")
    expert_rows = key.integer("expert_feed_forward_length")
    config = {
        **config_basics(key),
        "num_hidden_layers": key.integer("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": key.integer("attention.head_count_kv", heads),
        "head_dim": head_dim,
        "rope_theta": key.number("rope.freq_base", 500000.0),
        "moe_num_experts": key.integer("expert_count"),
        "moe_k": key.integer("expert_used_count"),
        "moe_intermediate_size": expert_rows,
        "intermediate_size": key.integer("feed_forward_length"),
        "moe_layer_start_index": key.integer("leading_dense_block_count", 0),
        "moe_layer_interval": key.integer("interleave_moe_layer_step"),
        "moe_num_shared_experts": key.integer("expert_shared_feed_forward_length", 0) // expert_rows,
    }
    return read_config(config)


def check_convertible(args: ModelArgs) -> None:
    """llama.cpp's loader expects experts in every layer from the first MoE one to the last."""
    first = args.moe_layers.index(True)
    if not all(args.moe_layers[first:]):
        raise UnsupportedModelError("ernie4_5_moe with dense layers after the first MoE layer (moe_layer_interval > 1 "
                                    "or moe_layer_end_index before the last layer): llama.cpp's ernie4_5-moe files "
                                    "cannot hold it")


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    writer.add_leading_dense_block_count(args.moe_layers.index(True))
    writer.add_interleave_moe_layer_step(1)
    if args.shared_experts.n_shared_experts:
        writer.add_expert_shared_feed_forward_length(args.shared_experts.n_shared_experts * args.moe_intermediate_size)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf, layer_modules=GGUF_LAYER_MODULES,
                    check_convertible=check_convertible, write_metadata=write_gguf_metadata, module_order=True),
    examples=("ERNIE-4.5-21B-A3B", "ERNIE-4.5-300B-A47B"),
    layers=("GQA, RoPE over interleaved pairs; softmax router with a correction bias for the choice (fp32); "
            "ungated shared experts; MoE from a start layer on"),
    shapes={"ernie-4.5-21b-a3b": ERNIE_45_21B_A3B},
)
