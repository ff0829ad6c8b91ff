"""What a web page can make a local server do: nothing without CORS. A page elsewhere is refused outright
(tests/server/test_origins.py); a body a browser sends without asking the server first (text/plain, forms) is
refused even from a page on this machine, and Access-Control-* answers only `--cors` origins."""

import httpx
import pytest

from engine.server import ServerLimits, start_server
from engine.server.limits import ServerConfigError
from tests.server.conftest import API_KEY
from tests.server.good_stream import beside_a_good_stream

BODY = b'{"model": "wisp-demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
PAGE = "http://localhost:3000"


def post_as(server, content_type: str, key: str | None = API_KEY) -> httpx.Response:
    headers = {"Content-Type": content_type, "Origin": PAGE}  # a page on this machine: its origin is let in
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(server.url + "/chat/completions", content=BODY, headers=headers, timeout=30)


@pytest.mark.parametrize("content_type", [
    "text/plain;application/json", "text/plain; charset=application/json", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=application/json", "application/jsonx", "application/json; charset=latin-1", "",
])
def test_bodies_a_browser_sends_without_preflight_are_refused(server, content_type):
    response = beside_a_good_stream(server, lambda: post_as(server, content_type))
    assert response.status_code == 415 and "Content-Type: application/json" in response.json()["error"]["message"]
    assert not any(name.lower().startswith("access-control") for name in response.headers)


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=UTF-8",
                                          'application/json;charset="utf-8"'])
def test_json_bodies_are_answered(server, content_type):
    assert post_as(server, content_type).status_code == 200


@pytest.fixture(scope="module")
def keyless_server(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0, limits=ServerLimits(cors_origins=(PAGE,)))
    yield handle
    handle.stop()


def preflight(server, origin: str) -> httpx.Response:
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "content-type"}
    return httpx.options(server.url + "/chat/completions", headers=headers, timeout=10)


def test_without_cors_no_page_is_let_in(server):
    response = preflight(server, PAGE)
    assert "access-control-allow-origin" not in response.headers and response.status_code >= 400


def test_cors_answers_the_named_origin_only(keyless_server):
    assert preflight(keyless_server, PAGE).headers["access-control-allow-origin"] == PAGE
    assert "access-control-allow-origin" not in preflight(keyless_server, "https://evil.example").headers
    answer = httpx.post(keyless_server.url + "/chat/completions", content=BODY, timeout=30,
                        headers={"Content-Type": "application/json", "Origin": PAGE})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == PAGE


@pytest.mark.parametrize("origin", ["localhost:3000", "http://localhost:3000/chat", "ftp://x", "http://"])
def test_a_cors_value_that_is_not_an_origin_is_refused(origin):
    with pytest.raises(ServerConfigError, match="scheme://host"):
        ServerLimits(cors_origins=(origin,))
