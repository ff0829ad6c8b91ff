"""Qwen3-Next (model_type "qwen3_next"): Gated DeltaNet in three of every four layers, gated full attention with
partial RoPE in the fourth, routed experts plus a gated shared expert (engine.model.hybrid); its DeltaNet
projections are fused per key head (in_proj_qkvz, in_proj_ba)."""

from engine.model.args import ModelArgs
from engine.model.families.family import Family
from engine.model.families.hybrid_config import hybrid_args
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "qwen3_next"


def read_config(config: dict) -> ModelArgs:
    return hybrid_args(config, MODEL_TYPE, fused_projections=True,
                       norm_topk_prob=bool(config.get("norm_topk_prob", True)))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
)
