"""Gemma 4 MoE as a text-only checkpoint (model_type "gemma4_text": what Gemma4ForCausalLM.save_pretrained writes,
e.g. fine-tunes): gemma4's language model (engine.model.families.gemma4), its tensors under model.*. It reads
llama.cpp's gemma4 files (engine.model.families.sandwich_gguf), which hold that language model whichever
checkpoint they were converted from."""

from engine.model.args import ModelArgs
from engine.model.families import sandwich_gguf
from engine.model.families.family import Family
from engine.model.families.gguf_keys import GgufKeys
from engine.model.families.sandwich_config import WEIGHT_NAMES, sandwich_model_args

MODEL_TYPE = "gemma4_text"


def read_config(config: dict) -> ModelArgs:
    return sandwich_model_args(config, MODEL_TYPE)


def read_gguf(key: GgufKeys) -> ModelArgs:
    return read_config(sandwich_gguf.text_config(key))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=sandwich_gguf.gguf_format(read_gguf),
    examples=("gemma-4-26B-A4B text-only fine-tunes",),
    layers="as gemma4 (the text-only checkpoint)",
)
