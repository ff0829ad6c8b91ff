"""Images over the server: OpenAI image_url parts (data URLs; http(s) URLs only with allow_image_urls) and
Ollama's `images` give the same text as the CLI for the same image; each bad image is a 400 naming the image and
the limit while another stream on the same engine finishes; a model without a tower answers a 400."""

import base64
import http.server
import json
import threading

import httpx
import pytest

from engine.api import Engine, EngineOptions
from engine.cli import main
from engine.server import ServerLimits, start_server
from tests.vision.tiny_vl import encoded_image, write_tiny_vl

pytest.importorskip("starlette")
MAX_TOKENS = 6
PICTURE = encoded_image(70, 50, 1)
LIMITS = ServerLimits(max_body_bytes=8 * 1024**2, max_tokens=64)


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory):
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl_server"))


@pytest.fixture(scope="module")
def vl_engine(vl_dir):
    with Engine(EngineOptions(model=str(vl_dir), device="cpu", dtype="float32")) as engine:
        yield engine


@pytest.fixture(scope="module")
def vl_server(vl_engine):
    handle = start_server(vl_engine, "127.0.0.1", 0, limits=LIMITS)
    yield handle
    handle.stop()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def openai_chat(server, *parts: dict, text: str = "def fib") -> httpx.Response:
    content = [*parts, {"type": "text", "text": text}]
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": MAX_TOKENS,
            "temperature": 0}
    return httpx.post(server.url + "/chat/completions", json=body, timeout=120)


def image_url_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def test_openai_ollama_and_cli_give_the_same_text(vl_server, vl_dir, tmp_path, capsys):
    openai = openai_chat(vl_server, image_url_part(data_url(PICTURE)))
    assert openai.status_code == 200, openai.text
    body = {"model": "m", "stream": False, "options": {"temperature": 0, "num_predict": MAX_TOKENS},
            "messages": [{"role": "user", "content": "def fib", "images": [base64.b64encode(PICTURE).decode()]}]}
    ollama = httpx.post(vl_server.url.removesuffix("/v1") + "/api/chat", json=body, timeout=120)
    assert ollama.status_code == 200, ollama.text
    (tmp_path / "a.png").write_bytes(PICTURE)
    assert main(["run", str(vl_dir), "--device", "cpu", "--dtype", "float32", "--chat", "--image",
                 str(tmp_path / "a.png"), "--prompt", "def fib", "--max-tokens", str(MAX_TOKENS), "--temperature",
                 "0", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["text"]
    assert cli and openai.json()["choices"][0]["message"]["content"] == cli == ollama.json()["message"]["content"]
    assert openai.json()["usage"]["prompt_tokens"] > 10


@pytest.mark.parametrize("parts, param, words", [
    ([image_url_part("data:image/png;base64," + base64.b64encode(b"GIF89a no").decode())],
     "image 0", "image 0 is not an image Wisp reads"),
    ([image_url_part(data_url(PICTURE))] * 17, "messages", "17 images, more than the limit of 16"),
    ([image_url_part("data:image/png;base64,%%%")], "messages.0.content.0.image_url", "not valid base64"),
    ([image_url_part("https://example.com/cat.png")], "messages.0.content.0.image_url", "--allow-image-urls"),
])
def test_a_bad_image_is_a_400_that_names_it(vl_server, parts, param, words):
    response = openai_chat(vl_server, *parts)
    error = response.json()["error"]
    assert response.status_code == 400 and words in error["message"] and error["param"] == param


def test_a_truncated_image_is_a_400_while_another_stream_finishes(vl_server):
    results = {}

    def good():
        results["good"] = openai_chat(vl_server, image_url_part(data_url(encoded_image(40, 120, 2))))

    thread = threading.Thread(target=good)
    thread.start()
    bad = openai_chat(vl_server, image_url_part(data_url(PICTURE[: len(PICTURE) // 2])))
    thread.join()
    assert bad.status_code == 400 and "image 0 is truncated or corrupt" in bad.json()["error"]["message"]
    assert results["good"].status_code == 200


def test_ollama_generate_takes_images_and_refuses_bad_base64(vl_server):
    url = vl_server.url.removesuffix("/v1") + "/api/generate"
    body = {"model": "m", "prompt": "def fib", "stream": False, "options": {"num_predict": 2},
            "images": [base64.b64encode(PICTURE).decode()]}
    assert httpx.post(url, json=body, timeout=120).status_code == 200
    bad = httpx.post(url, json={**body, "images": ["not base64!"]}, timeout=120)
    assert bad.status_code == 400 and "base64" in bad.json()["error"]


def test_image_urls_are_fetched_when_allowed(vl_engine):
    class One(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(PICTURE)

        def log_message(self, *args):
            pass

    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), One)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    handle = start_server(vl_engine, "127.0.0.1", 0, limits=ServerLimits(allow_image_urls=True, max_tokens=64))
    try:
        fetched = openai_chat(handle, image_url_part(f"http://127.0.0.1:{files.server_address[1]}/a.png"))
        inline = openai_chat(handle, image_url_part(data_url(PICTURE)))
    finally:
        handle.stop()
        files.shutdown()
    assert fetched.status_code == 200, fetched.text
    assert fetched.json()["choices"][0]["message"] == inline.json()["choices"][0]["message"]


def test_a_model_without_a_tower_answers_400(server):
    from tests.server.conftest import API_KEY

    headers = {"Authorization": f"Bearer {API_KEY}"}
    response = httpx.post(server.url + "/chat/completions", headers=headers, timeout=60, json={
        "messages": [{"role": "user", "content": [image_url_part(data_url(PICTURE))]}]})
    assert response.status_code == 400 and "this model does not take images" in response.json()["error"]["message"]
    ollama = httpx.post(server.url.removesuffix("/v1") + "/api/chat", headers=headers, timeout=60, json={
        "model": "m", "stream": False,
        "messages": [{"role": "user", "content": "hi", "images": [base64.b64encode(PICTURE).decode()]}]})
    assert ollama.status_code == 400 and "this model does not take images" in ollama.json()["error"]
