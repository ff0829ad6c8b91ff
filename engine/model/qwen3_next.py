"""Qwen3-Next (model_type "qwen3_next"): Gated DeltaNet in three of every four layers, gated full attention with
partial RoPE in the fourth, routed experts plus a gated shared expert (engine.model.hybrid)."""

from engine.model.args import ModelArgs
from engine.model.hybrid_config import hybrid_args
from engine.model.weight_names import QWEN_STYLE


def model_args(config: dict) -> ModelArgs:
    return hybrid_args(config, "qwen3_next", fused_projections=True,
                       norm_topk_prob=bool(config.get("norm_topk_prob", True)))


WEIGHT_NAMES = QWEN_STYLE
