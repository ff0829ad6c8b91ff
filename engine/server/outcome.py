"""How an engine FinishEvent that did not complete becomes an HTTP error."""

from __future__ import annotations

from engine.events import FinishEvent
from engine.server.api_errors import ApiError

STEP_FAILURE_PREFIX = "generation failed:"  # what api.Engine puts before a failed step's message


def finish_error(finish: FinishEvent) -> ApiError:
    """Errors raised while admitting a request (a prompt longer than the context, a chat template that
    refuses the conversation) are the client's (400); a failed step is the server's (500)."""
    if finish.reason == "cancelled":
        return ApiError(503, "the request was cancelled: the server is stopping", code="cancelled")
    message = finish.error or "generation failed"
    if message.startswith(STEP_FAILURE_PREFIX):
        return ApiError(500, message, code="generation_failed")
    return ApiError(400, message)
