"""Gemma 4 MoE (model_type "gemma4", the 26B-A4B): the sandwich-norm decoder (engine.model.sandwich). Five sliding-
window layers to one full-attention layer; the full layers have wider heads, fewer key/value heads whose keys are
also the values, and a RoPE of their own (transformers' "proportional": a quarter of the pairs turn). Every layer
runs a dense GELU MLP beside 128 experts (top-8, GELU-gated) routed from its input by a scaled router. The published
checkpoints are vision-language models: the language model reads text_config and the tensors under
model.language_model.* (engine.model.checkpoint); the vision tower beside it (vision_config, model.vision_tower.*,
model.embed_vision.*) is engine.vision's, its image tokens attending to each other both ways in the sliding layers
(use_bidirectional_attention "vision"). Gemma 4's smaller models (per-layer embeddings, shared KV layers, no experts)
are refused by name (engine.model.families.sandwich_config).
`wisp convert-gguf` writes the language model as llama.cpp's gemma4 file (engine.model.families.sandwich_gguf), which
gemma4_text reads: the file holds no vision tower; `--mmproj` writes it as llama.cpp's gemma4v mmproj file, which the
gemma4 files pair with (engine.gguf.mmproj_gemma4)."""

from dataclasses import replace

from engine.model.args import ModelArgs
from engine.model.families import sandwich_gguf
from engine.model.families.family import Family
from engine.model.families.gguf_keys import GgufKeys
from engine.model.families.multimodal_config import IMAGES_UNSUPPORTED, text_config
from engine.model.families.sandwich_config import WEIGHT_NAMES, sandwich_model_args
from engine.model.published_configs import GEMMA_4_26B_A4B
from engine.vision.gemma4_args import gemma4_vision_sizes

MODEL_TYPE = "gemma4"


def read_config(config: dict) -> ModelArgs:
    text = text_config(config)
    args = sandwich_model_args(text, MODEL_TYPE)
    vision = gemma4_vision_sizes(config, args.vocab_size)
    if vision:  # the tower runs (engine.vision.gemma4_tower)
        return replace(args, extra=vision)
    if config.get("vision_config") or config.get("audio_config"):
        args = replace(args, extra={"warning": IMAGES_UNSUPPORTED})
    return args


def reads_no_file(key: GgufKeys) -> bool:
    """A gemma4 file holds the language model alone: gemma4_text reads it."""
    return False


def read_gguf(key: GgufKeys) -> ModelArgs:
    return read_config({"text_config": sandwich_gguf.text_config(key)})


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=WEIGHT_NAMES,
    gguf=sandwich_gguf.gguf_format(read_gguf, reads=reads_no_file),
    examples=("gemma-4-26B-A4B",),
    layers="sliding-window and wider full attention (keys as values), a dense GELU MLP beside 128 experts top-8, "
           "sandwich norms, soft-capped logits (the language model of the vision-language checkpoint)",
    shapes={"gemma-4-26b-a4b": GEMMA_4_26B_A4B},
)
