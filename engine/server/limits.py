"""What the server accepts: request size, max_tokens, concurrency, and who may connect. Starlette-free."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from engine.errors import WispError

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


class ServerConfigError(WispError):
    """`wisp serve` was asked for something unsafe or impossible (an open host without a key, a busy port)."""


@dataclass(frozen=True)
class ServerLimits:
    """Per-server safety limits. max_tokens caps what one request may generate (also bounded by the
    model's context); beyond max_concurrent_requests in flight a request gets 429. Web pages of
    `cors_origins` (none by default) may call the server from a browser. Connections (engine.server.connections):
    at most max_connections open (fewer if the file limit is lower), a request's headers within header_timeout_s,
    its body within body_timeout_s, an idle keep-alive connection closed after idle_timeout_s, and a stream
    whose client reads nothing for send_timeout_s is cancelled."""

    max_body_bytes: int = 4 * 1024**2
    max_tokens: int = 4096
    max_concurrent_requests: int = 64
    max_stop_strings: int = 16
    cors_origins: tuple[str, ...] = ()
    max_connections: int = 1000
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    idle_timeout_s: float = 5.0
    send_timeout_s: float = 60.0
    allow_image_urls: bool = False  # fetch http(s) image_url parts (otherwise a 400: send data URLs)

    def __post_init__(self):
        if min(self.max_body_bytes, self.max_tokens, self.max_concurrent_requests, self.max_stop_strings,
               self.max_connections) < 1:
            raise ServerConfigError("server limits must be positive")
        if not min(self.header_timeout_s, self.body_timeout_s, self.idle_timeout_s, self.send_timeout_s) > 0:
            raise ServerConfigError("server timeouts must be positive")
        for origin in self.cors_origins:
            check_origin(origin)


def check_origin(origin: str) -> None:
    """A browser sends Origin as scheme://host[:port] and CORS compares it whole: anything else never matches."""
    scheme, separator, rest = origin.partition("://")
    if origin != "*" and not (scheme in ("http", "https") and separator and rest and "/" not in rest):
        raise ServerConfigError(f"--cors {origin!r} is not an origin: give it as scheme://host[:port], e.g. "
                                "http://localhost:3000 (no path), or * for every web page")


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address or a Host header's name) only reaches this machine."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to serve beyond this machine without an API key."""
    if not is_loopback(host) and not api_key:
        raise ServerConfigError(
            f"--host {host} makes the server reachable from other machines; give it an --api-key "
            "(or WISP_API_KEY) so that only your clients can use it, or keep the default --host 127.0.0.1")
