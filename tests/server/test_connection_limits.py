"""Connections that hold a local server without finishing a request: half a request line, a body that never
completes, more connections than the file limit allows, a client that stops reading its stream. Each is cut at
its deadline or refused at the cap, with a line or two in the log, and a good stream beside them keeps its
tokens."""

import logging
import socket
import time
from urllib.parse import urlsplit

import pytest

from engine.server import ServerLimits, start_server
from engine.server import connections
from tests.server.conftest import is_idle, wait_until
from tests.server.good_stream import beside_a_good_stream
from tests.server.test_hostile_requests import GOOD, stream_tokens

LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_tokens=4096, max_connections=20, header_timeout_s=1.5,
                      body_timeout_s=1.5, send_timeout_s=2.0)


@pytest.fixture(scope="module")
def guarded(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0, limits=LIMITS)
    for listening in handle._server.servers[0].sockets:  # small send buffers: a client that stops reading
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # blocks the server's writes sooner
    yield handle
    handle.stop()


def connect(server) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def is_closed_by_server(sock: socket.socket, within_s: float) -> bytes | None:
    """What the server sent before closing, or None if it kept the connection open past `within_s`."""
    sock.settimeout(within_s)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except socket.timeout:
        return None
    except ConnectionResetError:
        pass
    return received


def test_half_a_request_line_is_closed_at_the_header_deadline(guarded):
    def hostile():
        held = [connect(guarded) for _ in range(10)]
        for sock in held:
            sock.sendall(b"POST /v1/compl")
        outcomes = [is_closed_by_server(sock, within_s=LIMITS.header_timeout_s + 3) for sock in held]
        for sock in held:
            sock.close()
        return outcomes

    assert beside_a_good_stream(guarded, hostile, {**GOOD, "max_tokens": 40}) == [b""] * 10


def test_a_body_that_never_completes_is_cut_at_the_body_deadline(guarded):
    sock = connect(guarded)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"prompt\": ")
    assert is_closed_by_server(sock, within_s=LIMITS.body_timeout_s + 3) is not None
    sock.close()


def test_connections_past_the_cap_get_503_and_one_log_line(guarded, caplog):
    caplog.set_level(logging.WARNING, logger="wisp.server")
    held = [connect(guarded) for _ in range(LIMITS.max_connections)]
    time.sleep(0.3)
    extra = [connect(guarded) for _ in range(30)]
    answers = [is_closed_by_server(sock, within_s=5) for sock in extra]
    for sock in held + extra:
        sock.close()
    assert all(answer is not None and answer.startswith(b"HTTP/1.1 503") for answer in answers)
    assert b"too_many_connections" in answers[0]
    assert len([r for r in caplog.records if "cap" in r.getMessage()]) == 1
    assert wait_until(lambda: stream_tokens(guarded, {**GOOD, "max_tokens": 8}) is not None, 10)


def test_a_client_that_stops_reading_is_dropped(guarded, demo_engine):
    def hostile():
        parts = urlsplit(guarded.url)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((parts.hostname, parts.port))
        body = (b'{"model": "wisp-demo", "prompt": "def", "max_tokens": 2000, "ignore_eos": true, "stream": true, '
                b'"logprobs": 0, "return_tokens_as_token_ids": true}')
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        return sock

    started = time.monotonic()
    slow = beside_a_good_stream(guarded, hostile, {**GOOD, "max_tokens": 40})
    try:
        assert wait_until(lambda: is_idle(demo_engine), 30)
        assert time.monotonic() - started < 30  # ~10 s; its 2000 tokens take ~80 s on 2 CPU cores
    finally:
        slow.close()


def test_the_cap_stays_below_the_file_limit(monkeypatch):
    monkeypatch.setattr(connections.resource, "getrlimit", lambda kind: (1024, 4096))
    assert connections.connection_cap(ServerLimits(max_connections=5000)) == 1024 - connections.FD_RESERVE
    assert connections.connection_cap(ServerLimits(max_connections=100)) == 100


def test_accept_errors_log_one_line_without_traceback(caplog):
    connections.quiet_accept_errors()
    connections.quiet_accept_errors()
    logger = logging.getLogger("asyncio")
    error = OSError(24, "Too many open files")
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for _ in range(1000):
            logger.error("socket.accept() out of system resource\nsocket: %s", "<sock>", exc_info=error)
    lines = [record for record in caplog.records if record.name == "asyncio"]
    assert len(lines) <= 1 and all(record.exc_info is None for record in lines)
    assert all("Too many open files" in record.getMessage() for record in lines)
