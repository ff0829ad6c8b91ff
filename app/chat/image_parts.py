"""A message's images in a chat request: engine.api's parts ({"type": "image", "image": bytes}), for Wisp's engine and
for a remote server alike (engine.api sends a remote server OpenAI's image_url parts). Plain Python."""

from __future__ import annotations

REMOTE_MODEL_TYPE = "remote"  # ModelInfo.model_type of a remote OpenAI-compatible server
TOKENS_PER_IMAGE_GUESS = 256  # a remote server's image tokens, where it cannot count them


def is_remote(engine) -> bool:
    return getattr(getattr(engine, "info", None), "model_type", None) == REMOTE_MODEL_TYPE


def sees_images(engine) -> bool:
    """Does the loaded model take images? (A remote server's model answers for itself when it is sent one.)"""
    return engine is not None and (is_remote(engine) or bool(getattr(engine, "sees_images", False)))


def content_with_images(text: str, images: list[bytes]) -> str | list[dict]:
    """The images first, then the text (as the model's processor orders one user turn); plain text without images."""
    if not images:
        return text
    parts = [{"type": "image", "image": data} for data in images]
    return [*parts, {"type": "text", "text": text}] if text else parts


def estimated_tokens(content: str | list[dict]) -> int:
    """About four characters a token; a guess for each image."""
    if isinstance(content, str):
        return len(content) // 4
    return sum(len(part.get("text", "")) // 4 if part.get("type") == "text" else TOKENS_PER_IMAGE_GUESS
               for part in content)
