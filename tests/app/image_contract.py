"""engine.api's image parts in a chat message's content ({"type": "image", "image": bytes} beside
{"type": "text", "text": str}), for the app's tests while the engine's request check takes text content only."""

import pytest

import engine.requests
from engine.api import GenerateRequest, WispError
from engine.errors import RequestError

PART = {"role": "user", "content": [{"type": "image", "image": b"\x89PNG"}, {"type": "text", "text": "hi"}]}


def engine_takes_image_parts() -> bool:
    try:
        GenerateRequest(messages=(PART,))
    except WispError:
        return False
    return True


def text_of(content, field: str):
    """The text of a content list whose parts follow the contract (a RequestError for any other part)."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif not (part.get("type") == "image" and isinstance(part.get("image"), bytes)) and \
                not (part.get("type") == "image_url" and isinstance(part.get("image_url", {}).get("url"), str)):
            raise RequestError(f"{field} has a part that is neither text nor an image", field)
    return "".join(texts)


@pytest.fixture
def image_parts_accepted(monkeypatch):
    """Requests with image parts pass the engine's check: as they are once the engine takes them, through a check
    of the contract's parts until then."""
    if engine_takes_image_parts():
        return
    check = engine.requests.check_messages

    def check_with_parts(messages):
        check([{**message, "content": text_of(message.get("content"), f"messages.{index}.content")}
               if isinstance(message, dict) else message for index, message in enumerate(messages)])

    monkeypatch.setattr(engine.requests, "check_messages", check_with_parts)
