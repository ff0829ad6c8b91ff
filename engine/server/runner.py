"""Run the app on uvicorn: in the foreground for `wisp serve`, or in a background thread for the desktop
app's "serve this model" toggle."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from engine.server.app import create_app
from engine.server.connections import protocol_for, quiet_accept_errors, raise_file_limit
from engine.server.limits import ServerConfigError, ServerLimits, check_bind
from engine.server.shutdown import GracefulServer

STARTUP_TIMEOUT_S = 15.0
GRACEFUL_SHUTDOWN_S = 3


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts, so that a busy port is a readable error and port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError, ValueError) as error:  # a port outside 0-65535, a host name IDNA refuses
        sock.close()
        raise ServerConfigError(f"cannot listen on {host}:{port}: {getattr(error, 'strerror', None) or error}; "
                                "pick another --port (or stop what uses it)") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def server_url(host: str, port: int) -> str:
    """The base URL clients use; a wildcard bind is reached through loopback on this machine."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}/v1" if ":" in host else f"http://{host}:{port}/v1"


def make_server(engine, sock: socket.socket, api_key: str | None, limits: ServerLimits | None,
                model_id: str | None) -> uvicorn.Server:
    limits = limits or ServerLimits()
    quiet_accept_errors()
    app = create_app(engine, api_key=api_key, limits=limits, model_id=model_id)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", http=protocol_for(limits),
                            timeout_keep_alive=limits.idle_timeout_s, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    return GracefulServer(config)


@dataclass
class ServerHandle:
    """A server running in a background thread. `url` is the OpenAI base URL (ends in /v1)."""

    url: str
    host: str
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread

    @property
    def is_running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop accepting, cancel what is in flight (streams are closed, their engine requests cancelled)
        and wait for the thread. Any thread; the engine stays loaded."""
        self._server.config.app.state.bridge.stop()
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout_s)


def start_server(engine, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
                 limits: ServerLimits | None = None, model_id: str | None = None) -> ServerHandle:
    """Serve an already-loaded engine.api.Engine in a background thread; returns once it accepts
    connections. Port 0 picks a free port (see handle.port / handle.url). Raises ServerConfigError (a
    WispError) for a non-loopback host without an api_key or a port that cannot be bound."""
    check_bind(host, api_key)
    sock = bind_socket(host, port)
    server = make_server(engine, sock, api_key, limits, model_id)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="wisp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:  # uvicorn offers a flag, not an event
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise ServerConfigError(f"the server on {host}:{sock.getsockname()[1]} did not start")
        time.sleep(0.01)
    actual_port = sock.getsockname()[1]
    return ServerHandle(server_url(host, actual_port), host, actual_port, server, thread)


def serve_forever(engine, sock: socket.socket, api_key: str | None = None, limits: ServerLimits | None = None,
                  model_id: str | None = None) -> None:
    """`wisp serve`: run in the calling (main) thread on a socket from bind_socket (bound before the
    model loads, so that a busy port is reported at once) until Ctrl+C / SIGTERM (engine.server.shutdown)."""
    raise_file_limit()  # before the connection cap is set from it
    make_server(engine, sock, api_key, limits, model_id).run(sockets=[sock])
