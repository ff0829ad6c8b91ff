"""Export a conversation as Markdown (for people) or JSON (for programs)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from app.chat.conversation_store import Conversation, Message
from app.chat.markdown_render import fenced
from app.chat.tool_call_text import calls_line, tool_markdown


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    parts = [f"# {conversation.title}", ""]
    if conversation.system_prompt:
        parts += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    for message in (m for m in messages if not m.is_empty_failure):
        parts += [f"## {message.role.capitalize()}", ""]
        if message.info.get("reasoning"):
            parts += ["<details><summary>Reasoning</summary>", "", message.info["reasoning"], "", "</details>", ""]
        parts += [body_markdown(message), ""]
    return "\n".join(parts)


def body_markdown(message: Message) -> str:
    if message.role == "tool":
        return tool_markdown(message)
    if message.kind == "completion":
        return fenced(message.content)
    return "\n\n".join(part for part in (message.content, calls_line(message)) if part)


def to_json(conversation: Conversation, messages: list[Message]) -> str:
    document = {
        "title": conversation.title,
        "mode": conversation.mode,
        "created": datetime.fromtimestamp(conversation.created, timezone.utc).isoformat(),
        "system_prompt": conversation.system_prompt,
        "messages": [{"role": m.role, "kind": m.kind, "content": m.content, "info": m.info} for m in messages],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
