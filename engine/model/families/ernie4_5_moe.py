"""ERNIE 4.5 MoE (model_type "ernie4_5_moe"): GQA with RoPE over interleaved pairs (x0, x1), (x2, x3), ...; MoE
layers from moe_layer_start_index to moe_layer_end_index, every moe_layer_interval-th (dense MLPs elsewhere); a
softmax router whose choice adds a per-expert correction bias (the checkpoint's moe_statics) and whose top-k
probabilities are renormalised over a sum floored at moe_norm_min (engine.model.biased_softmax_router); ungated
shared experts (moe_num_shared_experts x moe_intermediate_size). As transformers' modeling_ernie4_5_moe.py computes it.
Biases on the linear layers (use_bias) are refused; the multi-token-prediction layers a checkpoint may carry are not
read."""

from dataclasses import dataclass

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs, common_args, require
from engine.model.biased_softmax_args import BiasedSoftmaxArgs
from engine.model.families.family import Family
from engine.model.weight_names import MoeWeightNames

MODEL_TYPE = "ernie4_5_moe"
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
        norm_topk_prob=True,
        n_shared_experts=require(config, "moe_num_shared_experts"),
        router="biased_softmax_topk",
        biased_softmax=BiasedSoftmaxArgs(norm_min=float(require(config, "moe_norm_min", float))),
        rope_layout="interleaved",
    )


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    examples=("ERNIE-4.5-21B-A3B", "ERNIE-4.5-300B-A47B"),
    layers=("GQA, RoPE over interleaved pairs; softmax router with a correction bias for the choice (fp32); "
            "ungated shared experts; MoE from a start layer on"),
)
