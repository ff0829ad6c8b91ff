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


def test_port_outside_the_tcp_range_exits_2_with_one_line(capsys):
    for port in ("99999", "-1"):
        assert main(["serve", f"--port={port}", "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all("--port" in line and "65535" in line for line in lines)


def test_the_key_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    from engine.cli import build_parser
    from engine.cli.serve import api_key

    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    parse = build_parser().parse_args
    monkeypatch.setenv("WISP_API_KEY", "from-env")
    assert api_key(parse(["serve", "--api-key-file", str(key_file)])) == "from-file"
    assert api_key(parse(["serve"])) == "from-env"
    monkeypatch.delenv("WISP_API_KEY")
    assert api_key(parse(["serve"])) is None


def test_an_unreadable_or_empty_key_file_exits_2(tmp_path, capsys):
    (tmp_path / "empty").write_text("\n")
    assert main(["serve", "--api-key-file", str(tmp_path / "empty"), "--device", "cpu"]) == 2
    assert main(["serve", "--api-key-file", str(tmp_path / "missing"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "is empty" in err and "cannot read the API key file" in err


def test_an_open_host_accepts_the_key_from_a_file(tmp_path, capsys, monkeypatch):
    """The key check passes with --api-key-file; the run then stops at the busy port, before loading."""
    monkeypatch.delenv("WISP_API_KEY", raising=False)
    (tmp_path / "key").write_text("secret\n")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--host", "0.0.0.0", "--port", str(port), "--api-key-file", str(tmp_path / "key"),
                     "--device", "cpu"]) == 2
    assert "cannot listen" in capsys.readouterr().err
