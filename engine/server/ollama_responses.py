"""Ollama's response objects: model cards for /api/tags, /api/show and /api/ps, and the NDJSON lines of
/api/chat and /api/generate (plain dicts)."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime, timezone

from engine.events import FinishEvent
from engine.server.model_size import parameter_size
from engine.server.served_model import ServedModel
from engine.server.tools import arguments

OLLAMA_API_VERSION = "0.12.0"  # the Ollama API whose endpoints Wisp answers


def ollama_name(served: ServedModel) -> str:
    """Ollama names carry a tag; clients list and select `name:latest`."""
    return served.id if ":" in served.id else f"{served.id}:latest"


def timestamp(seconds: float | None = None) -> str:
    return datetime.fromtimestamp(seconds or time.time(), timezone.utc).isoformat().replace("+00:00", "Z")


def details(served: ServedModel) -> dict:
    return {"parent_model": "", "format": "safetensors", "family": served.family, "families": [served.family],
            "parameter_size": parameter_size(served.num_parameters), "quantization_level": ""}


def model_card(served: ServedModel, created: float) -> dict:
    name = ollama_name(served)
    return {"name": name, "model": name, "modified_at": timestamp(created), "size": served.size_bytes,
            "digest": hashlib.sha256(served.id.encode()).hexdigest(), "details": details(served)}


def running_card(served: ServedModel, created: float) -> dict:
    return {**model_card(served, created), "expires_at": "9999-12-31T23:59:59Z", "size_vram": 0,
            "context_length": served.max_model_len}


def show(served: ServedModel, created: float) -> dict:
    capabilities = ["completion"] + (["tools"] if served.tool_calls else [])
    if served.fim_token_ids() is not None:
        capabilities.append("insert")
    return {"modelfile": f"FROM {served.id}\n", "parameters": "", "template": served.chat_template,
            "details": details(served), "capabilities": capabilities, "modified_at": timestamp(created),
            "model_info": {"general.architecture": served.family, f"{served.family}.context_length":
                           served.max_model_len}}


def durations(finish: FinishEvent) -> dict:
    stats = finish.stats
    ns = 1_000_000_000
    return {"total_duration": int(stats.total_s * ns), "load_duration": 0,
            "prompt_eval_count": stats.prompt_tokens, "prompt_eval_duration": int(stats.ttft_s * ns),
            "eval_count": stats.generated_tokens, "eval_duration": int(max(stats.total_s - stats.ttft_s, 0) * ns)}


def done_reason(finish: FinishEvent) -> str:
    return "length" if finish.reason == "length" else "stop"


def chat_line(served: ServedModel, content: str, thinking: str = "") -> dict:
    message = {"role": "assistant", "content": content}
    if thinking:
        message["thinking"] = thinking
    return {"model": ollama_name(served), "created_at": timestamp(), "message": message, "done": False}


def chat_final(served: ServedModel, finish: FinishEvent, content: str, thinking: str) -> dict:
    line = chat_line(served, content, thinking)
    if finish.tool_calls:
        line["message"]["tool_calls"] = [{"function": {"name": call.name, "arguments": arguments(call.arguments)}}
                                         for call in finish.tool_calls]
    return {**line, "done": True, "done_reason": done_reason(finish), **durations(finish)}


def generate_line(served: ServedModel, text: str, thinking: str = "") -> dict:
    line = {"model": ollama_name(served), "created_at": timestamp(), "response": text, "done": False}
    return {**line, "thinking": thinking} if thinking else line


def generate_final(served: ServedModel, finish: FinishEvent, text: str, thinking: str) -> dict:
    return {**generate_line(served, text, thinking), "done": True, "done_reason": done_reason(finish),
            "context": [], **durations(finish)}


def ndjson(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"
