"""Who may call the server: the API key on /v1 (OpenAI's) and /api (Ollama's) routes; on a loopback server
without a key, only clients that address it by a loopback name (a web page cannot reach it through DNS
rebinding); and on every route that changes state, no web page but those on loopback or named by `--cors`
(a page may POST text/plain anywhere without asking first, and browsers always say whose page it is)."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from engine.server.api_errors import error_body
from engine.server.limits import is_loopback


def host_name(host_header: str) -> str:
    """'127.0.0.1:8000' -> '127.0.0.1', '[::1]:8000' -> '::1', 'localhost' -> 'localhost'."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class GuardMiddleware:
    """Pure ASGI middleware (it never buffers a streamed response)."""

    def __init__(self, app, api_key: str | None, is_checking_host: bool, cors_origins: tuple[str, ...] = ()):
        self.app, self.api_key, self.is_checking_host = app, api_key, is_checking_host
        self.cors_origins = cors_origins

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope) -> JSONResponse | None:
        headers = Headers(scope=scope)
        if "content-length" in headers and "transfer-encoding" in headers:
            message = "send Content-Length or Transfer-Encoding, not both (RFC 9112 6.1); the connection is closed"
            return JSONResponse(error_body(400, message, code="ambiguous_body_length"), status_code=400,
                                headers={"Connection": "close"})
        host = headers.get("host", "")
        if self.is_checking_host and not is_loopback(host_name(host)):
            message = (f"the Host header '{host}' does not name this machine; this server has no API key and "
                       "only answers clients that address it as localhost / 127.0.0.1")
            return JSONResponse(error_body(400, message, code="invalid_host"), status_code=400)
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None and not self.is_allowed_origin(origin):
            message = (f"requests from web pages at {origin[:100]!r} are refused; start the server with "
                       "--cors ORIGIN to allow a page")
            if scope["path"].startswith("/api"):
                return JSONResponse({"error": message}, status_code=403)
            return JSONResponse(error_body(403, message, code="origin_not_allowed"), status_code=403)
        if scope["path"].startswith(("/v1", "/api")) and not is_authorised(headers, self.api_key):
            message = "missing or wrong API key: send the header 'Authorization: Bearer <key>'"
            return JSONResponse(error_body(401, message, code="invalid_api_key"), status_code=401)
        return None

    def is_allowed_origin(self, origin: str) -> bool:
        """A page on this machine (http(s)://localhost, 127.0.0.1, [::1]) or one `--cors` names."""
        if origin in self.cors_origins or "*" in self.cors_origins:
            return True
        try:
            parts = urlsplit(origin)
            return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")
        except ValueError:
            return False


def is_authorised(headers: Headers, api_key: str | None) -> bool:
    """Whether the request carries the server's key (always, for a server without one)."""
    if not api_key:
        return True
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), api_key.encode())
