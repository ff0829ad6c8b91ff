"""Model → Draft tokens: how the model drafts tokens that one decode step then checks (speculative decoding,
lossless). "ngram" copies them from the conversation; "mtp" takes them from the model's own draft (multi-token
prediction) layers; "auto" the draft layers where the model has them, else the conversation. Plain Python."""

from __future__ import annotations

SPECULATIVE_CHOICES = ("off", "ngram", "mtp", "auto")


def has_draft_layers(engine) -> bool:
    """The loaded model holds draft layers Wisp runs (engine.api.Engine.has_draft_layers)."""
    return engine is not None and bool(getattr(engine, "has_draft_layers", False))


def load_mode(choice: str) -> str:
    """EngineOptions.speculative at load: draft layers are loaded (where the model has them) for mtp and auto
    only; prompt lookup needs nothing loaded, so ngram is asked per request."""
    return "auto" if choice in ("mtp", "auto") else "off"


def request_mode(choice: str) -> str:
    """GenerateRequest.speculative: the engine drafts the way it was loaded for (its draft layers, where it loaded
    them, else the conversation)."""
    return "auto" if choice in ("mtp", "auto") else choice


def old_setting(value) -> str:
    """A settings file from before the choice held a switch: on meant drafts from the conversation."""
    return ("ngram" if value else "off") if isinstance(value, bool) else value
