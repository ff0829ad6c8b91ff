"""`wisp serve` stopped by SIGTERM or Ctrl+C: open streams end with finish_reason "abort" and [DONE], the
process exits within seconds and prints no traceback; a second signal exits at once."""

import json
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server.serve_process import ServeProcess, wait_for

STREAM = {"model": "wisp-demo", "prompt": "def fib(n):", "max_tokens": 2000, "ignore_eos": True, "stream": True}


def read_stream(url: str, lines: list[str], first: threading.Event) -> None:
    with httpx.stream("POST", url + "/completions", json=STREAM, timeout=60) as response:
        for line in response.iter_lines():
            if line:
                lines.append(line)
                first.set()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_open_streams_with_abort_and_done(sig):
    with ServeProcess() as server:
        streams = [([], threading.Event()) for _ in range(3)]
        readers = [threading.Thread(target=read_stream, args=(server.url, lines, first)) for lines, first in streams]
        for reader in readers:
            reader.start()
        assert all(first.wait(60) for _, first in streams)
        abort_upload(server.url)
        server.process.send_signal(sig)
        status = server.wait(15)
        for reader in readers:
            reader.join(10)
    for lines, _ in streams:
        assert lines[-1] == "data: [DONE]"
        chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
        finishes = [chunk["choices"][0]["finish_reason"] for chunk in chunks if chunk.get("choices")]
        assert finishes[-1] == "abort" and "stopping" in chunks[-1]["error"]["message"]
    assert status in (0, 130, -signal.SIGTERM) and "Traceback" not in server.log, server.log


def abort_upload(url: str) -> None:
    """A client that announces a body, sends part of it and hangs up."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{\"prompt\": \"")
        time.sleep(0.2)


def test_an_aborted_upload_logs_nothing():
    with ServeProcess() as server:
        for _ in range(3):
            abort_upload(server.url)
        assert httpx.get(server.url.removesuffix("/v1") + "/health").status_code == 200
        server.process.send_signal(signal.SIGTERM)
        server.wait(15)
    assert "Traceback" not in server.log and "ClientDisconnect" not in server.log, server.log


def test_a_second_signal_exits_at_once():
    with ServeProcess() as server:
        parts = urlsplit(server.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=5) as slow_upload:
            slow_upload.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            time.sleep(0.3)
            server.process.send_signal(signal.SIGTERM)  # waits for the upload, up to the graceful timeout
            time.sleep(0.3)
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            assert wait_for(lambda: server.process.poll() is not None, 2.0)
            assert time.monotonic() - started < 1.5 and "Traceback" not in server.log
