"""Qwen3.5 / 3.6 MoE (model_type "qwen3_5_moe"): Qwen3-Next's hybrid stack (engine.model.hybrid) with separate
DeltaNet projections (in_proj_qkv, _z, _b, _a) and always-renormalised top-k weights. The published checkpoints
are vision-language models: Wisp runs their language model (config's text_config; tensors under
model.language_model.*, engine.model.checkpoint) and says that images are not supported."""

from dataclasses import replace

from engine.model.args import ModelArgs
from engine.model.families.family import Family
from engine.model.families.hybrid_config import hybrid_args
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "qwen3_5_moe"
IMAGES_UNSUPPORTED = "this model also reads images; Wisp runs its language model only, images are not supported yet"


def text_config(config: dict) -> dict:
    """The language model's fields; top-level ones (dtype, tie_word_embeddings) fill what text_config lacks."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return config
    return {**{k: v for k, v in config.items() if k not in ("text_config", "vision_config")}, **text}


def read_config(config: dict) -> ModelArgs:
    args = hybrid_args(text_config(config), MODEL_TYPE, fused_projections=False, norm_topk_prob=True)
    if config.get("vision_config"):
        return replace(args, extra={"warning": IMAGES_UNSUPPORTED})
    return args


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
)
