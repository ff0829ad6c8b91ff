"""Export a conversation as Markdown (for people) or JSON (for programs)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from app.chat.conversation_store import Conversation, Message
from app.chat.markdown_render import fenced


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    parts = [f"# {conversation.title}", ""]
    if conversation.system_prompt:
        parts += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    for message in (m for m in messages if not m.is_empty_failure):
        parts += [f"## {message.role.capitalize()}", ""]
        if message.info.get("reasoning"):
            parts += ["<details><summary>Reasoning</summary>", "", message.info["reasoning"], "", "</details>", ""]
        parts += [fenced(message.content) if message.kind == "completion" else message.content, ""]
    return "\n".join(parts)


def to_json(conversation: Conversation, messages: list[Message]) -> str:
    document = {
        "title": conversation.title,
        "mode": conversation.mode,
        "created": datetime.fromtimestamp(conversation.created, timezone.utc).isoformat(),
        "system_prompt": conversation.system_prompt,
        "messages": [{"role": m.role, "kind": m.kind, "content": m.content, "info": m.info} for m in messages],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
