"""Which drafting a model gets for --speculative: its own multi-token-prediction (MTP / nextn) layer where its
checkpoint holds one that Wisp runs, else n-grams of the prompt and the reply."""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import RequestError
from engine.model.args import ModelArgs
from engine.model.mtp_names import DraftLayerNames

DRAFT_LAYER_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")  # Qwen3.5/Qwen3-Next; DeepSeek-V3/GLM-4.5


def count_draft_layers(config: dict) -> int:
    """The draft layers a checkpoint's config.json declares (a multimodal config's text_config included)."""
    found = [int(config.get(key) or 0) for key in DRAFT_LAYER_KEYS]
    nested = config.get("text_config")
    return max(found + ([count_draft_layers(nested)] if isinstance(nested, dict) else []))


def folder_draft_layers(folder: Path | None) -> int:
    try:
        return count_draft_layers(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")))
    except (OSError, TypeError, ValueError):
        return 0  # a GGUF file, or no readable config: no draft layers Wisp can run


def runnable_draft_layer(folder: Path | None, args: ModelArgs) -> tuple[DraftLayerNames | None, str]:
    """(the layout of the draft layer the checkpoint in folder holds and Wisp runs, or None; why not, if None)."""
    from engine.model.checkpoint import Checkpoint
    from engine.model.families import family
    from engine.model.mtp_loader import has_draft_layer

    if folder is None:
        return None, "Wisp reads draft layers from safetensors checkpoints only, not GGUF files"
    names = family(args.model_type).draft_layer
    if not folder_draft_layers(folder) or names is None:
        return None, "has no draft (MTP) layers"
    if not has_draft_layer(Checkpoint(folder), args, names):
        return None, "declares draft (MTP) layers, but its files hold no draft-layer tensors"
    return names, ""


def drafting_kind(mode: str, draft_layer: DraftLayerNames | None, model_name: str, why_not: str = "") -> str | None:
    """--speculative MODE for this model -> "mtp", "ngram", or None for off; a RequestError for mtp where it cannot
    run. auto: mtp where the model has a draft layer Wisp runs, else ngram."""
    if mode == "off":
        return None
    if mode == "mtp" and draft_layer is None:
        raise RequestError(f"--speculative mtp: {model_name} {why_not or 'has no draft (MTP) layers'}; "
                           "use --speculative ngram")
    if mode == "ngram" or draft_layer is None:
        return "ngram"
    return "mtp"
