"""One engine request answered over HTTP, whatever the API's shape (OpenAI's, Ollama's): wait for the first event,
so that a refused request is a proper HTTP error even when streaming, then stream or collect. A disconnect at any
point cancels the engine request. Event loop thread."""

from __future__ import annotations

from typing import Callable

from starlette.requests import Request
from starlette.responses import Response

from engine.events import Event, FinishEvent, TokenEvent
from engine.server.api_errors import CLIENT_CLOSED
from engine.server.bridge import ClientGone, Generation, unless_disconnected
from engine.server.outcome import finish_error

Streamed = Callable[[Event], Response]  # the first event -> a streaming response that closes the generation
Collected = Callable[[FinishEvent, list[TokenEvent]], Response]  # the end and every token -> the whole answer


async def answer_one(request: Request, generation: Generation, streamed: Streamed | None,
                     collected: Collected) -> Response:
    """`streamed` when the client asked for a stream (None: collect the whole answer into `collected`)."""
    try:
        first = await unless_disconnected(request.receive, generation.next_event())
        raise_if_failed(first)
        if streamed is not None:
            response = streamed(first)
            generation = None  # the response closes it
            return response
        finish, tokens = await unless_disconnected(request.receive, collect(generation, first))
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        if generation is not None:
            generation.close()
    raise_if_failed(finish)
    return collected(finish, tokens)


def raise_if_failed(event: Event) -> None:
    if isinstance(event, FinishEvent) and event.reason in ("error", "cancelled"):
        raise finish_error(event)


async def collect(generation: Generation, first: Event) -> tuple[FinishEvent, list[TokenEvent]]:
    tokens: list[TokenEvent] = []
    event = first
    while not isinstance(event, FinishEvent):
        tokens.append(event)
        event = await generation.next_event()
    return event, tokens
