"""Server-sent events: the response class that stops (and cancels the request) when the client goes away,
and the chunk sequences of chat and text completions."""

from __future__ import annotations

import json
from typing import AsyncIterator, Callable

import anyio
from starlette.responses import StreamingResponse

from engine.events import Event, FinishEvent, TokenEvent
from engine.server.api_errors import error_body
from engine.server.bridge import Generation, wait_for_disconnect
from engine.server.outcome import finish_error
from engine.server.responses import Shape, chat_chunk, chat_delta, completion_chunk, finish_reason, usage_chunk
from engine.server.tools import StreamedToolCalls

DONE = b"data: [DONE]\n\n"
DEFAULT_SEND_TIMEOUT_S = 60.0


def bounded_send(send, timeout_s: float):
    """`send` that raises TimeoutError when the client has read nothing for `timeout_s` (its socket buffer is
    full): a client that stops reading must not hold its request and its engine slot for ever."""

    async def send_within(message) -> None:
        with anyio.fail_after(timeout_s):
            await send(message)

    return send_within


def sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


class EventStreamResponse(StreamingResponse):
    """Streams SSE chunks while watching for the client's disconnect; `on_close` runs either way
    (it cancels the engine request when it did not finish)."""

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None],
                 headers: dict[str, str] | None = None, media_type: str = "text/event-stream"):
        super().__init__(chunks, media_type=media_type, headers={"cache-control": "no-cache", **(headers or {})})
        self.on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        timeout_s = getattr(getattr(scope.get("app"), "state", None), "send_timeout_s", DEFAULT_SEND_TIMEOUT_S)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._stream, bounded_send(send, timeout_s), group.cancel_scope)
                group.start_soon(self._watch, receive, group.cancel_scope)
        finally:
            try:
                with anyio.CancelScope(shield=True):  # a cancelled handler still closes its chunks
                    await self.body_iterator.aclose()
            finally:
                self.on_close()  # releases the request's slot even when closing the chunks raised

    async def _stream(self, send, scope: anyio.CancelScope) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (OSError, TimeoutError):  # the client went away mid-write, or stopped reading
            pass
        scope.cancel()

    async def _watch(self, receive, scope: anyio.CancelScope) -> None:
        await wait_for_disconnect(receive)
        scope.cancel()


async def events_from(generation: Generation, first: Event) -> AsyncIterator[Event]:
    event = first
    yield event
    while not isinstance(event, FinishEvent):
        event = await generation.next_event()
        yield event


def ending(shape: Shape, finish: FinishEvent, include_usage: bool) -> list[dict]:
    if finish.reason in ("error", "cancelled"):
        error = finish_error(finish)
        return [error_body(error.status, error.message, code=error.code)]
    return [usage_chunk(shape, finish)] if include_usage else []


async def chat_stream(generation: Generation, first: Event, shape: Shape, include_usage: bool) -> AsyncIterator[bytes]:
    yield sse(chat_chunk(shape, {"role": "assistant", "content": ""}, []))
    num_sent = num_reasoning_sent = 0
    calls = StreamedToolCalls()
    async for event in events_from(generation, first):
        if isinstance(event, TokenEvent):
            if event.text or event.reasoning or event.tool_call_deltas or shape.logprobs:
                delta = chat_delta(event.text, event.reasoning) or ({} if event.tool_call_deltas else {"content": ""})
                if event.tool_call_deltas:
                    delta["tool_calls"] = calls.pieces(event.tool_call_deltas)
                yield sse(chat_chunk(shape, delta, [event]))
                num_sent, num_reasoning_sent = num_sent + len(event.text), num_reasoning_sent + len(event.reasoning)
            continue
        if event.reason != "error":  # a cancelled stream (the server is stopping) ends with finish_reason abort
            delta = chat_delta(event.text[num_sent:], event.reasoning[num_reasoning_sent:])
            if rest := calls.rest(event.tool_calls):
                delta["tool_calls"] = rest
            yield sse(chat_chunk(shape, delta, [], finish_reason(event)))
        for obj in ending(shape, event, include_usage):
            yield sse(obj)
    yield DONE


async def completion_stream(generation: Generation, first: Event, shape: Shape,
                            include_usage: bool) -> AsyncIterator[bytes]:
    num_sent = 0
    async for event in events_from(generation, first):
        if isinstance(event, TokenEvent):
            if event.text or shape.logprobs:
                yield sse(completion_chunk(shape, event.text, [event], num_sent))
                num_sent += len(event.text)
            continue
        if event.reason != "error":
            yield sse(completion_chunk(shape, event.text[num_sent:], [], num_sent, finish_reason(event)))
        for obj in ending(shape, event, include_usage):
            yield sse(obj)
    yield DONE
