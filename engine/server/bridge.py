"""Engine events -> asyncio. Each request's events are forwarded from the engine thread into its own
asyncio.Queue; requests share the engine's steps through its continuous batching."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

from engine.errors import WispError
from engine.events import Event, FinishEvent
from engine.requests import GenerateRequest
from engine.server.api_errors import ApiError

T = TypeVar("T")
RETRY_AFTER_S = 1  # a busy server frees a slot as soon as one stream ends; clients back off from here
Receive = Callable[[], Awaitable[dict]]


class ClientGone(Exception):
    """The client closed its connection before the answer was complete."""


class Generation:
    """One submitted request. Events arrive in order through `next_event()` (event loop thread)."""

    def __init__(self, bridge: "EngineBridge", request_id: str):
        self._bridge = bridge
        self.request_id = request_id
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self.finish: FinishEvent | None = None
        self._is_closed = False

    def on_event(self, event: Event) -> None:
        """Engine thread: hand the event to the event loop (quick, never blocks)."""
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:  # the event loop is gone (server stopped); the request is cancelled by close()
            pass

    async def next_event(self) -> Event:
        event = await self._events.get()
        if isinstance(event, FinishEvent):
            self.finish = event
        return event

    def close(self) -> None:
        """Release the concurrency slot; cancel the request in the engine if it has not finished."""
        if self._is_closed:
            return
        self._is_closed = True
        self._bridge.release(self.request_id)
        if self.finish is None:
            self._bridge.engine.cancel(self.request_id)


class EngineBridge:
    """Submits requests to an engine.api.Engine with a cap on how many are in flight (event loop thread,
    except stop())."""

    def __init__(self, engine, max_concurrent_requests: int):
        self.engine = engine
        self.max_concurrent_requests = max_concurrent_requests
        self.in_flight: set[str] = set()
        self.is_stopping = False

    @property
    def num_in_flight(self) -> int:
        return len(self.in_flight)

    def submit(self, request: GenerateRequest) -> Generation:
        if self.is_stopping:
            raise ApiError(503, "the server is stopping", code="server_stopping")
        if self.num_in_flight >= self.max_concurrent_requests:
            raise ApiError(429, f"the server is busy: {self.num_in_flight} requests in flight "
                                f"(at most {self.max_concurrent_requests}); retry shortly", code="too_many_requests",
                           headers={"Retry-After": str(RETRY_AFTER_S)})
        generation = Generation(self, request.request_id)
        try:
            self.engine.submit(request, generation.on_event)
        except WispError as error:
            raise ApiError(503, f"the model is not available: {error}", code="model_unavailable") from None
        self.in_flight.add(request.request_id)
        return generation

    def release(self, request_id: str) -> None:
        self.in_flight.discard(request_id)

    def stop(self) -> None:
        """Any thread: refuse new requests and cancel those in flight, so that open streams end at once
        (each gets a final 503 error chunk) instead of holding the shutdown."""
        self.is_stopping = True
        for request_id in list(self.in_flight):
            self.engine.cancel(request_id)


async def unless_disconnected(receive: Receive, awaitable: Awaitable[T]) -> T:
    """Await `awaitable`, or raise ClientGone as soon as the client disconnects (request body already read)."""
    work = asyncio.ensure_future(awaitable)
    watch = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        is_gone = not work.done()
        if is_gone:
            work.cancel()
    if is_gone:
        raise ClientGone
    return work.result()


async def wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
