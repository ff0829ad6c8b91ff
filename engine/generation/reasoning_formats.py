"""Which reasoning format a model writes, read from its chat template and vocabulary."""

from __future__ import annotations

from engine.generation.harmony import HARMONY
from engine.generation.reasoning import ReasoningFormat
from engine.generation.think_tags import THINK_TAGS


def reasoning_format(tokenizer) -> ReasoningFormat | None:
    """Harmony when the template writes harmony channels and every marker is one token of the vocabulary;
    think tags when the template knows `</think>`; None for a model that does not reason."""
    source = tokenizer.chat_template_source
    if "<|channel|>" in source and len(HARMONY.marker_ids(tokenizer)) == len(HARMONY.markers):
        return HARMONY
    if "</think>" in source:
        return THINK_TAGS
    return None
