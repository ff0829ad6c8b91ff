"""Ollama's API beside OpenAI's on the same port: /api/version, /api/tags, /api/show, /api/ps, and /api/chat and
/api/generate (streamed as NDJSON unless `"stream": false`). Any model name reaches the one model served (the
`Warning` header says so). Errors are Ollama's shape, {"error": "..."} (event loop thread)."""

from __future__ import annotations

import time
from typing import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.errors import RequestError
from engine.events import Event, FinishEvent, TokenEvent
from engine.server.answer import answer_one
from engine.server.api_errors import ApiError, bad_request
from engine.server.body import parse_json
from engine.server.bridge import EngineBridge, Generation
from engine.server.extra_fields import warning_header
from engine.server.limits import ServerLimits
from engine.server.ollama_convert import OllamaPrepared, chat_request, generate_request
from engine.server.ollama_responses import (OLLAMA_API_VERSION, chat_final, chat_line, generate_final, generate_line,
                                            model_card, ndjson, ollama_name, running_card, show, timestamp)
from engine.server.outcome import finish_error
from engine.server.served_model import ServedModel
from engine.server.streaming import EventStreamResponse

NDJSON = "application/x-ndjson"


def ollama_error(error: Exception) -> JSONResponse:
    status = error.status if isinstance(error, ApiError) else 400
    message = error.message if isinstance(error, ApiError) else str(error)
    return JSONResponse({"error": message}, status_code=status, headers=getattr(error, "headers", None))


def answered_in_ollama_shape(handler: Callable) -> Callable:
    async def wrapped(self, request: Request) -> Response:
        try:
            return await handler(self, request)
        except (ApiError, RequestError) as error:
            return ollama_error(error)
    return wrapped


class OllamaRoutes:
    def __init__(self, bridge: EngineBridge, served: ServedModel, limits: ServerLimits):
        self.bridge, self.served, self.limits = bridge, served, limits
        self.created = time.time()

    def routes(self) -> list[tuple[str, Callable, list[str]]]:
        return [("/api/version", self.version, ["GET"]), ("/api/tags", self.tags, ["GET"]),
                ("/api/ps", self.ps, ["GET"]), ("/api/show", self.show, ["POST"]),
                ("/api/chat", self.chat, ["POST"]), ("/api/generate", self.generate, ["POST"]),
                ("/api/embed", self.embed, ["POST"]), ("/api/embeddings", self.embed, ["POST"])]

    async def embed(self, request: Request) -> JSONResponse:
        return JSONResponse({"error": f"embeddings are not supported: '{self.served.id}' is served for generation "
                                      "only (use an embedding model's own server)"}, status_code=501)

    async def version(self, request: Request) -> JSONResponse:
        return JSONResponse({"version": OLLAMA_API_VERSION})

    async def tags(self, request: Request) -> JSONResponse:
        return JSONResponse({"models": [model_card(self.served, self.created)]})

    async def ps(self, request: Request) -> JSONResponse:
        return JSONResponse({"models": [running_card(self.served, self.created)]})

    @answered_in_ollama_shape
    async def show(self, request: Request) -> JSONResponse:
        body = await self.body(request)
        return JSONResponse(show(self.served, self.created), headers=warning_header(self.name_warning(body)))

    @answered_in_ollama_shape
    async def chat(self, request: Request) -> Response:
        body = await self.body(request)
        if body.get("messages") == []:  # Ollama's "load the model" request
            return JSONResponse({"model": ollama_name(self.served), "created_at": timestamp(),
                                 "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "load"})
        prepared = chat_request(body, self.served, self.limits, self.name_warning(body))
        return await self.answer(request, prepared, ChatLines(self.served))

    @answered_in_ollama_shape
    async def generate(self, request: Request) -> Response:
        body = await self.body(request)
        if not body.get("prompt") and not body.get("suffix"):  # Ollama's "load the model" request
            return JSONResponse({"model": ollama_name(self.served), "created_at": timestamp(), "response": "",
                                 "done": True, "done_reason": "load"})
        prepared = generate_request(body, self.served, self.limits, self.name_warning(body))
        return await self.answer(request, prepared, GenerateLines(self.served))

    async def body(self, request: Request) -> dict:
        """The JSON object in the body (Ollama's clients do not always say Content-Type), size-limited."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.limits.max_body_bytes:
                raise ApiError(413, f"the request body is larger than this server's limit of "
                                    f"{self.limits.max_body_bytes} bytes")
        data = parse_json(bytes(body)) if body else {}
        if not isinstance(data, dict):
            raise bad_request("the body must be a JSON object")
        return data

    def name_warning(self, body: dict) -> list[str]:
        name = body.get("model") or body.get("name")
        if name in (None, self.served.id, ollama_name(self.served)):
            return []
        return [f"model {str(name)[:80]!r} is answered by the model this server serves, {self.served.id!r}"]

    async def answer(self, request: Request, prepared: OllamaPrepared, lines: "ChatLines") -> Response:
        generation, headers = self.bridge.submit(prepared.request), warning_header(prepared.warnings)

        def streamed(first: Event) -> Response:
            return EventStreamResponse(lines.stream(generation, first), on_close=generation.close, headers=headers,
                                       media_type=NDJSON)

        def collected(finish: FinishEvent, tokens: list[TokenEvent]) -> Response:
            return JSONResponse(lines.final(finish, finish.text, finish.reasoning), headers=headers)

        return await answer_one(request, generation, streamed if prepared.stream else None, collected)


class ChatLines:
    """The NDJSON lines of /api/chat: one per token that completed text, then the final line with the stats."""

    line, final_line = staticmethod(chat_line), staticmethod(chat_final)

    def __init__(self, served: ServedModel):
        self.served = served

    def final(self, finish: FinishEvent, text: str, thinking: str) -> dict:
        return self.final_line(self.served, finish, text, thinking)

    async def stream(self, generation: Generation, first: Event) -> AsyncIterator[bytes]:
        event, num_sent, num_thinking_sent = first, 0, 0
        while isinstance(event, TokenEvent):
            if event.text or event.reasoning:
                yield ndjson(self.line(self.served, event.text, event.reasoning))
                num_sent, num_thinking_sent = num_sent + len(event.text), num_thinking_sent + len(event.reasoning)
            event = await generation.next_event()
        if event.reason in ("error", "cancelled"):
            yield ndjson({"error": finish_error(event).message})
            return
        yield ndjson(self.final(event, event.text[num_sent:], event.reasoning[num_thinking_sent:]))


class GenerateLines(ChatLines):
    line, final_line = staticmethod(generate_line), staticmethod(generate_final)
