"""How an engine FinishEvent that did not complete becomes an HTTP error."""

from __future__ import annotations

from engine.events import ErrorKind, FinishEvent
from engine.server.api_errors import ApiError


def finish_error(finish: FinishEvent) -> ApiError:
    """A refused request (a prompt longer than the context, a chat template that refuses the conversation)
    is the client's error (400); a failed step is the server's (500)."""
    if finish.reason == "cancelled":
        return ApiError(503, "the request was cancelled: the server is stopping", code="cancelled")
    message = finish.error or "generation failed"
    if finish.error_kind is ErrorKind.FAILED:
        return ApiError(500, message, code="generation_failed")
    return ApiError(400, message)
