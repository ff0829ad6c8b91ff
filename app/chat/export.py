"""Export a conversation as Markdown (for people) or JSON (for programs); the messages' images are embedded
(data URLs in Markdown, base64 in JSON), so the file stands alone."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from typing import Callable

from app.chat.conversation_store import Conversation, Message
from app.chat.images import data_url, image_mime

ImageSource = Callable[[str], "bytes | None"]  # an image's bytes by its digest (None: its file is gone)


def no_images(digest: str) -> None:
    return None
from app.chat.markdown_render import fenced
from app.chat.tool_call_text import calls_line, tool_markdown


def to_markdown(conversation: Conversation, messages: list[Message], image_source: ImageSource = no_images) -> str:
    parts = [f"# {conversation.title}", ""]
    if conversation.system_prompt:
        parts += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    for message in (m for m in messages if not m.is_empty_failure):
        parts += [f"## {message.role.capitalize()}", ""]
        if message.info.get("reasoning"):
            parts += ["<details><summary>Reasoning</summary>", "", message.info["reasoning"], "", "</details>", ""]
        parts += [image_markdown(digest, image_source, number) for number, digest in enumerate(images_of(message), 1)]
        parts += [body_markdown(message), ""]
    return "\n".join(parts)


def images_of(message: Message) -> list[str]:
    return list(message.info.get("images") or [])


def image_markdown(digest: str, image_source: ImageSource, number: int) -> str:
    data = image_source(digest)
    if data is None:
        return f"*(image {number}: its file {digest} is gone)*\n"
    return f"![image {number}]({data_url(data)})\n"


def body_markdown(message: Message) -> str:
    if message.role == "tool":
        return tool_markdown(message)
    if message.kind == "completion":
        return fenced(message.content)
    return "\n\n".join(part for part in (message.content, calls_line(message)) if part)


def to_json(conversation: Conversation, messages: list[Message], image_source: ImageSource = no_images) -> str:
    document = {
        "title": conversation.title,
        "mode": conversation.mode,
        "created": datetime.fromtimestamp(conversation.created, timezone.utc).isoformat(),
        "system_prompt": conversation.system_prompt,
        "messages": [{"role": m.role, "kind": m.kind, "content": m.content, "info": m.info,
                      **({"images": [image_json(digest, image_source) for digest in images_of(m)]}
                         if images_of(m) else {})} for m in messages],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def image_json(digest: str, image_source: ImageSource) -> dict:
    """{"sha256", "mime", "base64"}; the last two are null when the image's file is gone."""
    data = image_source(digest)
    return {"sha256": digest, "mime": image_mime(data) if data else None,
            "base64": base64.b64encode(data).decode("ascii") if data else None}
