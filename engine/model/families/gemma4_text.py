"""Gemma 4 MoE as a text-only checkpoint (model_type "gemma4_text": what Gemma4ForCausalLM.save_pretrained writes,
e.g. fine-tunes): gemma4's language model (engine.model.families.gemma4), its tensors under model.*."""

from engine.model.args import ModelArgs
from engine.model.families.family import Family
from engine.model.families.sandwich_config import WEIGHT_NAMES, sandwich_model_args

MODEL_TYPE = "gemma4_text"


def read_config(config: dict) -> ModelArgs:
    return sandwich_model_args(config, MODEL_TYPE)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    examples=("gemma-4-26B-A4B text-only fine-tunes",),
    layers="as gemma4 (the text-only checkpoint)",
)
