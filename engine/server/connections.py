"""Limits on connections, which uvicorn does not have: a cap on open connections below the process's file
limit (past it a connection gets 503 and is closed, before it can starve the accept loop of descriptors), a
deadline for a request's headers and one for its body (a client that sends half a request line and waits no
longer holds its connection), and at most one log line per LOG_EVERY_S about any of it."""

from __future__ import annotations

import json
import logging
import resource
import time

from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.server.api_errors import error_body
from engine.server.limits import ServerLimits

FD_RESERVE = 128  # descriptors kept for the model's files, the engine, logs and the listening socket
MAX_NOFILE = 65536
LOG_EVERY_S = 10.0
log = logging.getLogger("wisp.server")


def raise_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (at most MAX_NOFILE); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard if hard != resource.RLIM_INFINITY else MAX_NOFILE, MAX_NOFILE)
    if wanted > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(limits: ServerLimits) -> int:
    """limits.max_connections, or fewer when the file limit leaves less room."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = soft - FD_RESERVE if soft != resource.RLIM_INFINITY else limits.max_connections
    return max(1, min(limits.max_connections, room))


class RateLimitedLog:
    """One warning per LOG_EVERY_S, saying how many times it happened since the last one."""

    def __init__(self):
        self.last, self.count = 0.0, 0

    def warning(self, message: str) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= LOG_EVERY_S:
            log.warning("%s (%d times in the last %.0f s)", message, self.count, min(now - self.last, 1e9))
            self.last, self.count = now, 0


class AcceptErrorFilter(logging.Filter):
    """asyncio logs a traceback for every failed accept() (out of descriptors: 200k of them in 80 s); let one
    line through per LOG_EVERY_S."""

    def __init__(self):
        super().__init__()
        self.last = -LOG_EVERY_S

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("socket.accept() out of system resource"):
            return True
        now = time.monotonic()
        if now - self.last < LOG_EVERY_S:
            return False
        self.last = now
        error = record.exc_info[1] if record.exc_info else None
        record.msg, record.args, record.exc_info = f"cannot accept connections: {error}", (), None
        return True


def quiet_accept_errors() -> None:
    """Install AcceptErrorFilter on asyncio's logger (once)."""
    logger = logging.getLogger("asyncio")
    if not any(isinstance(existing, AcceptErrorFilter) for existing in logger.filters):
        logger.addFilter(AcceptErrorFilter())


def busy_response(cap: int) -> bytes:
    body = json.dumps(error_body(503, f"the server holds its most open connections ({cap}); retry shortly",
                                 code="too_many_connections")).encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
            f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n")
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap and header/body deadlines (event loop thread)."""

    limits = ServerLimits()
    max_connections = 1
    refusals = RateLimitedLog()
    timeouts = RateLimitedLog()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._deadline = None
        if len(self.connections) > self.max_connections:
            transport.write(busy_response(self.max_connections))
            transport.close()
            self.refusals.warning(f"refused connections past the cap of {self.max_connections}")
            return
        self._arm(self.limits.header_timeout_s)

    def handle_events(self) -> None:
        previous = self.cycle
        super().handle_events()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return  # still waiting for a request's headers: the deadline armed for them holds
        if not cycle.more_body:
            self._disarm()
        elif cycle is not previous:
            self._arm(self.limits.body_timeout_s)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        is_waiting = self.cycle is None or self.cycle.response_complete  # not already reading a pipelined one
        if is_waiting and not self.transport.is_closing():
            self._arm(self.limits.header_timeout_s)  # the next request (keep-alive closes an idle one sooner)

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._on_deadline)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.timeouts.warning("closed connections that sent no complete request in time")
            self.transport.close()


def protocol_for(limits: ServerLimits) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn builds for each connection, holding this server's limits."""
    return type("WispH11Protocol", (GuardedH11Protocol,),
                {"limits": limits, "max_connections": connection_cap(limits), "refusals": RateLimitedLog(),
                 "timeouts": RateLimitedLog()})
