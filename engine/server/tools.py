"""Function calling over the OpenAI API: the tools a request offers, the conversation's tool turns as the chat
template takes them, and the calls a reply made as OpenAI's `tool_calls`. The model must take tools and the
engine must read its calls back (harmony or `<tool_call>` blocks: ModelInfo.tool_calls)."""

from __future__ import annotations

import json
import uuid

from engine.events import ToolCall, ToolCallDelta
from engine.server.api_errors import bad_request
from engine.server.image_parts import data_url_bytes, image_url_of, refuse_without_tower
from engine.server.schemas import ChatCompletionRequest, ChatMessage
from engine.server.served_model import ServedModel

MEDIA_KINDS = ("image", "audio", "video", "file")  # what content parts other than text carry


def offered_tools(body: ChatCompletionRequest, served: ServedModel) -> tuple[dict, ...] | None:
    """The tools to render (None when none are offered or tool_choice is "none"); 400 for what Wisp cannot do."""
    if body.functions or body.function_call not in (None, "none", "auto"):
        raise bad_request("functions and function_call are the API's old form: send tools instead", "functions")
    if not body.tools or body.tool_choice == "none":
        return None
    if not served.tool_calls:
        raise bad_request(f"model '{served.id}' does not take tools: its chat template has none, or writes calls "
                          "in a form Wisp does not read (it reads gpt-oss's harmony and <tool_call> blocks)", "tools")
    return tuple(body.tools)


def forced_tool_choice(body: ChatCompletionRequest) -> str | None:
    """OpenAI's tool_choice as GenerateRequest.tool_choice: None (auto, none), "required", or a function's name
    (the reply is then that call, its arguments held to the tool's parameters schema)."""
    choice = body.tool_choice
    if choice in (None, "auto", "none"):
        return None
    if choice == "required":
        return choice
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise bad_request('tool_choice is "auto", "none", "required" or {"type": "function", "function": '
                          '{"name": ...}}', "tool_choice")
    return function["name"]


def template_message(message: ChatMessage, index: int, served: ServedModel | None = None,
                     fetched: dict | None = None) -> dict:
    """One turn as chat templates take it: text content (a list of text and image parts where it has images), and
    an assistant's calls with their arguments as objects (templates write them with tojson) where the JSON text
    parses. fetched: the bytes of http(s) image URLs, by (message, part) (engine.server.image_parts)."""
    turn = {"role": "system" if message.role == "developer" else message.role,
            "content": content_parts(message, index, served, fetched or {})}
    if message.content is None and not (message.role == "assistant" and message.tool_calls):
        raise bad_request("content is required (only an assistant turn that calls tools may leave it out)",
                          f"messages.{index}.content")
    if message.tool_calls:
        if message.role != "assistant":
            raise bad_request("only assistant turns make tool calls", f"messages.{index}.tool_calls")
        turn["tool_calls"] = [
            {"id": call.id or f"call_{index}_{number}", "type": "function",
             "function": {"name": call.function.name, "arguments": arguments(call.function.arguments)}}
            for number, call in enumerate(message.tool_calls)]
    if message.role == "tool":
        if message.tool_call_id is None:
            raise bad_request("a tool turn names the call it answers", f"messages.{index}.tool_call_id")
        turn["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        turn["name"] = message.name
    return turn


def content_parts(message: ChatMessage, index: int, served: ServedModel | None, fetched: dict) -> str | list[dict]:
    """The turn's text, or its text and image parts where it has image_url parts."""
    parts = message.content if isinstance(message.content, list) else ()
    if not any(part.type == "image_url" for part in parts):
        return content_text(message, index)
    out = []
    for number, part in enumerate(parts):
        field = f"messages.{index}.content.{number}"
        if part.type == "text" and part.text is not None:
            out.append({"type": "text", "text": part.text})
            continue
        if part.type != "image_url":
            content_text(message.model_copy(update={"content": [part]}), index)  # the 400 naming what it is
        refuse_without_tower(served is not None and served.sees_images, served.id if served else "", field)
        url = image_url_of(part)
        if (index, number) in fetched:
            out.append({"type": "image", "image": fetched[(index, number)]})
        elif not isinstance(url, str):
            raise bad_request('an image_url part is {"type": "image_url", "image_url": {"url": ...}}', field)
        else:
            out.append({"type": "image", "image": data_url_bytes(url, f"{field}.image_url")})
    return out


def content_text(message: ChatMessage, index: int) -> str:
    """The turn's text: its content, or its text parts joined; 400 naming the part for images, audio or files."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    for number, part in enumerate(message.content):
        field = f"messages.{index}.content.{number}"
        if part.type != "text":
            kind = next((kind for kind in MEDIA_KINDS if kind in part.type), part.type[:40])
            raise bad_request(f"this model reads text only and does not take {kind} parts: send the content as text "
                              "(a string, or parts of type \"text\")", field)
        if part.text is None:
            raise bad_request("a text part needs its text", f"{field}.text")
    return "".join(part.text for part in message.content)


def arguments(text: str) -> object:
    """A call's JSON arguments as an object, or the text as written when it is not a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def tool_calls_out(calls: tuple[ToolCall, ...]) -> list[dict]:
    """The calls a reply made, in OpenAI's message shape (each with a fresh id); stream deltas add `index`."""
    return [{"id": new_call_id(), "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in calls]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class StreamedToolCalls:
    """A streamed reply's tool calls in OpenAI's delta shape: a call's first delta has its id, type and name, the
    next ones pieces of its arguments, all with the call's index; `rest` ends them with what the finished calls
    have beyond what was streamed (all of a call whose format could not be followed as it was generated)."""

    def __init__(self):
        self._sent: dict[int, str] = {}  # index -> the arguments streamed

    def pieces(self, deltas: tuple[ToolCallDelta, ...]) -> list[dict]:
        return [self._piece(delta) for delta in deltas]

    def _piece(self, delta: ToolCallDelta) -> dict:
        if delta.name is not None:
            self._sent[delta.index] = delta.arguments
            return {"index": delta.index, "id": new_call_id(), "type": "function",
                    "function": {"name": delta.name, "arguments": delta.arguments}}
        self._sent[delta.index] = self._sent.get(delta.index, "") + delta.arguments
        return {"index": delta.index, "function": {"arguments": delta.arguments}}

    def rest(self, calls: tuple[ToolCall, ...]) -> list[dict]:
        out = []
        for index, call in enumerate(calls):
            if index not in self._sent:
                out.append({"index": index, "id": new_call_id(), "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments}})
            elif call.arguments.startswith(self._sent[index]) and call.arguments != self._sent[index]:
                out.append({"index": index, "function": {"arguments": call.arguments[len(self._sent[index]):]}})
        return out
