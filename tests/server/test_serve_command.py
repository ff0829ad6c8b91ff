"""`wisp serve` refuses unsafe or impossible settings with exit 2 and one line, before loading the model."""

import socket

from engine.cli import main
from engine.server.guard import host_name
from engine.server.limits import is_loopback


def test_open_host_without_api_key_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("WISP_API_KEY", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--device", "cpu"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_busy_port_exits_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--device", "cpu"]) == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


def test_loopback_names():
    assert all(map(is_loopback, ["127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost", "app.localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.2", "example.com", "localhost.example.com", ""]))
    assert [host_name(h) for h in ["127.0.0.1:8000", "[::1]:8000", "localhost", "::1"]] == [
        "127.0.0.1", "::1", "localhost", "::1"]
