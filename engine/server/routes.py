"""The HTTP endpoints: /v1/models, /v1/chat/completions, /v1/completions and /health (event loop thread)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.events import Event, FinishEvent, TokenEvent
from engine.server.answer import answer_one
from engine.server.api_errors import ApiError
from engine.server.bridge import EngineBridge
from engine.server.choices import answer_choices
from engine.server.body import read_json
from engine.server.convert import Prepared, chat_request, completion_request
from engine.server.image_parts import fetch_remote_images
from engine.server.extra_fields import warning_header
from engine.server.guard import is_authorised
from engine.server.limits import ServerLimits
from engine.server.responses import Shape, chat_completion, model_card, text_completion
from engine.server.schemas import ChatCompletionRequest, CompletionRequest, parse_body
from engine.server.served_model import ServedModel
from engine.server.streaming import EventStreamResponse, chat_stream, completion_stream


class Routes:
    def __init__(self, bridge: EngineBridge, served: ServedModel, limits: ServerLimits, api_key: str | None = None):
        self.bridge, self.served, self.limits, self.api_key = bridge, served, limits, api_key
        self.created = int(time.time())

    async def health(self, request: Request) -> JSONResponse:
        """Liveness for anyone; what runs here and how busy it is only for holders of the key."""
        if not is_authorised(request.headers, self.api_key):
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "ok", "model": self.served.id, "requests_in_flight": self.bridge.num_in_flight})

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [model_card(self.served, self.created)]})

    async def model(self, request: Request) -> JSONResponse:
        name = request.path_params["model_id"]
        if name != self.served.id:
            raise ApiError(404, f"the model '{name}' does not exist here; this server serves '{self.served.id}'",
                           param="model", code="model_not_found")
        return JSONResponse(model_card(self.served, self.created))

    async def embeddings(self, request: Request) -> JSONResponse:
        raise ApiError(501, f"embeddings are not supported: '{self.served.id}' is served for generation only "
                            "(use an embedding model's own server)", code="not_implemented")

    async def chat_completions(self, request: Request) -> Response:
        body = parse_body(ChatCompletionRequest, await read_json(request, self.limits.max_body_bytes))
        fetched = await fetch_remote_images(body.messages, self.limits.allow_image_urls, self.served)
        return await self.answer(request, chat_request(body, self.served, self.limits, fetched), is_chat=True)

    async def completions(self, request: Request) -> Response:
        body = parse_body(CompletionRequest, await read_json(request, self.limits.max_body_bytes))
        return await self.answer(request, completion_request(body, self.served, self.limits), is_chat=False)

    async def answer(self, request: Request, prepared: Prepared, is_chat: bool) -> Response:
        """Submit, then stream or collect (engine.server.answer); n > 1: the choices together."""
        shape = Shape(is_chat, prepared.request.request_id, self.served, prepared.logprobs, prepared.tokens_as_ids)
        if prepared.n > 1:
            return await answer_choices(self.bridge, request, prepared, shape)
        generation, headers = self.bridge.submit(prepared.request), warning_header(prepared.warnings)

        def streamed(first: Event) -> Response:
            stream = chat_stream if is_chat else completion_stream
            return EventStreamResponse(stream(generation, first, shape, prepared.include_usage),
                                       on_close=generation.close, headers=headers)

        def collected(finish: FinishEvent, tokens: list[TokenEvent]) -> Response:
            return JSONResponse((chat_completion if is_chat else text_completion)(shape, finish, tokens),
                                headers=headers)

        return await answer_one(request, generation, streamed if prepared.stream else None, collected)
