"""OpenAI-shaped errors: {"error": {"message", "type", "param", "code"}} with the matching HTTP status."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.errors import RequestError

CLIENT_CLOSED = 499  # nginx's status for "the client closed the request"; nobody reads it
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    501: "invalid_request_error",
    503: "service_unavailable_error",
}


class ApiError(Exception):
    """An error answered to the client; raised anywhere in a request handler."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers


class ErrorResponse(JSONResponse):
    """JSON with non-ASCII escaped: a message may quote what the client sent, lone surrogates included,
    which UTF-8 cannot encode."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "param": param,
                      "code": code}}


def error_response(error: ApiError) -> JSONResponse:
    return ErrorResponse(error_body(error.status, error.message, error.param, error.code), status_code=error.status,
                         headers=error.headers)


async def on_api_error(request: Request, error: ApiError) -> JSONResponse:
    return error_response(error)


async def on_http_exception(request: Request, error: HTTPException) -> JSONResponse:
    """Starlette's own 404/405 (unknown route, wrong method) in the OpenAI shape, or Ollama's under /api."""
    message = f"{request.method} {request.url.path}: {error.detail}"
    if request.url.path.startswith("/api/"):
        return ErrorResponse({"error": message}, status_code=error.status_code)
    return error_response(ApiError(error.status_code, message, code="not_found" if error.status_code == 404 else None))


async def on_request_error(request: Request, error: RequestError) -> JSONResponse:
    """A value the engine's request checks refused (engine.request_checks): the client's fault, naming the field."""
    return error_response(bad_request(str(error), param=error.field))


async def on_client_disconnect(request: Request, error: Exception) -> Response:
    """The client left while sending its body: nobody reads an answer, and it is no server error to log."""
    return Response(status_code=CLIENT_CLOSED)


async def on_unexpected(request: Request, error: Exception) -> JSONResponse:
    return error_response(ApiError(500, f"internal error: {type(error).__name__}: {error}"))


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param)
