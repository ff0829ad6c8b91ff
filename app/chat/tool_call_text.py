"""How a tool call reads in the chat: the tool's name, its arguments and its result as plain code blocks (shown,
never run), and the time it took; and the line an assistant reply that only called tools shows."""

from __future__ import annotations

import json

from app.chat.conversation_store import Message
from app.chat.markdown_render import fenced


def pretty_arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


def tool_markdown(message: Message) -> str:
    info = message.info
    parts = [f"**{info.get('name', 'tool')}** called with", fenced(pretty_arguments(info.get("arguments", "")))]
    if info.get("running"):
        parts.append("*Waiting for the tool…*")
    else:
        parts += ["Error:" if info.get("is_error") else "Result:", fenced(message.content)]
    return "\n\n".join(parts)


def tool_stats(message: Message) -> str:
    info = message.info
    if info.get("running"):
        return "running…"
    state = "stopped" if info.get("reason") == "cancelled" else "failed" if info.get("is_error") else "done"
    return f"{state} · {info.get('seconds', 0.0):.2f} s"


def calls_line(message: Message) -> str:
    """The calls an assistant reply made, for a reply with no text of its own."""
    names = ", ".join(f"`{call['name']}`" for call in message.info.get("tool_calls", []))
    return f"Calls {names}" if names else ""
