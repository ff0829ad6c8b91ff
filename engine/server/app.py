"""The ASGI application for one loaded engine.api.Engine (starlette)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from engine.errors import RequestError
from engine.server.api_errors import (ApiError, on_api_error, on_client_disconnect, on_http_exception, on_request_error,
                                     on_unexpected)
from engine.server.bridge import EngineBridge
from engine.server.guard import GuardMiddleware
from engine.server.limits import ServerLimits
from engine.server.ollama import OllamaRoutes
from engine.server.routes import Routes
from engine.server.served_model import ServedModel


def create_app(engine, api_key: str | None = None, limits: ServerLimits | None = None,
               model_id: str | None = None) -> Starlette:
    """An OpenAI-compatible app, with Ollama's API under /api, serving `engine` (an engine.api.Engine or anything
    with its submit/cancel/info).
    Without an API key only loopback Host names are answered; the caller decides where to bind
    (engine.server.runner refuses a non-loopback bind without a key)."""
    limits = limits or ServerLimits()
    routes = Routes(EngineBridge(engine, limits.max_concurrent_requests), ServedModel.of(engine, model_id), limits,
                    api_key)
    ollama = OllamaRoutes(routes.bridge, routes.served, limits)
    app = Starlette(
        routes=[
            Route("/health", routes.health, methods=["GET"]),
            Route("/v1/models", routes.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", routes.model, methods=["GET"]),
            Route("/v1/chat/completions", routes.chat_completions, methods=["POST"]),
            Route("/v1/completions", routes.completions, methods=["POST"]),
            Route("/v1/embeddings", routes.embeddings, methods=["POST"]),
            *(Route(path, handler, methods=methods) for path, handler, methods in ollama.routes()),
        ],
        middleware=cors(limits) + [Middleware(GuardMiddleware, api_key=api_key, is_checking_host=not api_key,
                                                          cors_origins=limits.cors_origins)],
        exception_handlers={ApiError: on_api_error, RequestError: on_request_error, HTTPException: on_http_exception,
                            ClientDisconnect: on_client_disconnect, Exception: on_unexpected},
    )
    app.state.bridge = routes.bridge  # runner.ServerHandle.stop() cancels what is in flight through it
    app.state.send_timeout_s = limits.send_timeout_s  # streaming.EventStreamResponse gives up on a stuck client
    return app


def cors(limits: ServerLimits) -> list[Middleware]:
    """Access-Control-* headers for the origins `wisp serve --cors ORIGIN` names, and for no one else."""
    if not limits.cors_origins:
        return []
    return [Middleware(CORSMiddleware, allow_origins=list(limits.cors_origins), allow_methods=["GET", "POST"],
                       allow_headers=["Authorization", "Content-Type"], max_age=600)]
