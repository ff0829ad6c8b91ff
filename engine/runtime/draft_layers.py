"""Which drafting a model gets for --speculative: its own multi-token-prediction (MTP / nextn) layers where its
checkpoint has them and Wisp runs them, else n-grams of the prompt and the reply."""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import RequestError

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


def drafting_kind(mode: str, folder: Path | None, model_name: str) -> str | None:
    """--speculative MODE for this model -> "ngram", or None for off; a RequestError for mtp where it cannot run."""
    if mode == "off":
        return None
    if mode == "mtp":
        if not folder_draft_layers(folder):
            raise RequestError(f"--speculative mtp: {model_name} has no draft (MTP) layers; use --speculative ngram")
        raise RequestError(f"--speculative mtp: drafting from {model_name}'s MTP layers is not supported yet; use "
                           "--speculative ngram (or auto)")
    return "ngram"  # auto: MTP layers are not run yet, so every model drafts by prompt lookup
