"""Which drafting a model gets for --speculative: its own multi-token-prediction (MTP / nextn) layer where its
checkpoint holds one that Wisp runs (engine.model.mtp_loader.runnable_draft_layer), else n-grams of the prompt and
the reply."""

from __future__ import annotations

from engine.errors import RequestError
from engine.model.mtp_loader import count_draft_layers, runnable_draft_layer  # noqa: F401 - the CLI's tests read them
from engine.model.mtp_names import DraftLayerNames


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
