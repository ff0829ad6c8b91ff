"""`n` > 1: one request per choice, submitted together so that the engine batches them and the prefix cache shares
their prompt's KV blocks. A seeded request's choice i samples with seed + i, so each choice equals a single
request with that seed. Streamed choices interleave in one event stream, each chunk naming its choice's index
(event loop thread)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial
from typing import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.events import Event, FinishEvent
from engine.sampling_checks import SEED_MAX
from engine.requests import GenerateRequest
from engine.server.answer import collect, raise_if_failed
from engine.server.api_errors import CLIENT_CLOSED
from engine.server.bridge import ClientGone, EngineBridge, Generation, unless_disconnected
from engine.server.convert import Prepared
from engine.server.extra_fields import warning_header
from engine.server.responses import Shape, chat_completion, text_completion, usage
from engine.server.streaming import DONE, EventStreamResponse, chat_stream, completion_stream, sse



def choice_requests(request: GenerateRequest, n: int) -> list[GenerateRequest]:
    """n copies with their own ids; choice i of a seeded request samples with seed + i."""
    seed = request.sampling.seed
    requests = []
    for index in range(n):
        choice_seed = None if seed is None else (seed + index if seed + index <= SEED_MAX else seed - index)
        sampling = replace(request.sampling, seed=choice_seed)
        requests.append(replace(request, sampling=sampling, request_id=f"{request.request_id}-{index}"))
    return requests


def combined_usage(finishes: list[FinishEvent]) -> dict:
    """The prompt once (the choices share it), every choice's completion tokens."""
    prompt = usage(finishes[0].stats)["prompt_tokens"]
    completion = sum(finish.stats.generated_tokens for finish in finishes)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "spec_proposed": sum(finish.stats.spec_proposed for finish in finishes),
            "spec_accepted": sum(finish.stats.spec_accepted for finish in finishes)}


async def answer_choices(bridge: EngineBridge, request: Request, prepared: Prepared, shape: Shape) -> Response:
    generations: list[Generation] = []
    try:
        for choice in choice_requests(prepared.request, prepared.n):
            generations.append(bridge.submit(choice))
        firsts = [await unless_disconnected(request.receive, g.next_event()) for g in generations]
        for first in firsts:
            raise_if_failed(first)
        shapes = [replace(shape, index=index) for index in range(prepared.n)]
        if prepared.stream:
            chunks = merged_stream(generations, firsts, shapes, prepared.include_usage)
            response = EventStreamResponse(chunks, on_close=partial(close_all, generations),
                                           headers=warning_header(prepared.warnings))
            generations = []  # the response closes them (partial holds the list: a lambda would see this one)
            return response
        results = [await unless_disconnected(request.receive, collect(g, first))
                   for g, first in zip(generations, firsts)]
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        close_all(generations)
    return JSONResponse(whole_response(shapes, results), headers=warning_header(prepared.warnings))


def whole_response(shapes: list[Shape], results: list[tuple[FinishEvent, list]]) -> dict:
    for finish, _ in results:
        raise_if_failed(finish)
    build = chat_completion if shapes[0].is_chat else text_completion
    answers = [build(shape, finish, tokens) for shape, (finish, tokens) in zip(shapes, results)]
    choices = [choice for answer in answers for choice in answer["choices"]]
    return {**answers[0], "choices": choices, "usage": combined_usage([finish for finish, _ in results])}


def close_all(generations: list[Generation]) -> None:
    for generation in generations:
        generation.close()


async def merged_stream(generations: list[Generation], firsts: list[Event], shapes: list[Shape],
                        include_usage: bool) -> AsyncIterator[bytes]:
    """Each choice's chunks as they come; then one usage chunk (when asked) and [DONE]."""
    stream = chat_stream if shapes[0].is_chat else completion_stream
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def pump(chunks: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in chunks:
                if chunk != DONE:
                    await queue.put(chunk)
        finally:
            await queue.put(None)

    tasks = [asyncio.ensure_future(pump(stream(g, first, shape, False)))
             for g, first, shape in zip(generations, firsts, shapes)]
    try:
        remaining = len(tasks)
        while remaining:
            chunk = await queue.get()
            if chunk is None:
                remaining -= 1
            else:
                yield chunk
    finally:
        for task in tasks:
            task.cancel()
    finishes = [g.finish for g in generations]
    if include_usage and all(finish is not None for finish in finishes):
        obj = "chat.completion.chunk" if shapes[0].is_chat else "text_completion"
        yield sse({**shapes[0].envelope(obj, []), "usage": combined_usage(finishes)})
    yield DONE
