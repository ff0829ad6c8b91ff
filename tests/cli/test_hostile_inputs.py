"""Inputs that once ended `wisp` in a traceback or a hang: absurd sizes, broken GGUF metadata, JSON nested past
Python's recursion limit, a remote server's malformed model list, a chat template that loops for hours. Each is
one line on stderr and status 2 (or a WispError at the API)."""

import json
import shutil
import struct
import time

import httpx
import pytest

from engine.backends.remote import RemoteError, fetch_models, pick_model
from engine.text.chat_template import ChatTemplate
from engine.cli import main
from engine.errors import ModelFormatError, TokenizerError
from engine.gguf.reader import GgufFile
from engine.loading.model_path import DEMO_MODEL

NINES = "9" * 400
DEEP = 20_000


def one_line_status_2(argv, capsys, *words):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wisp: error: ") and "Traceback" not in captured.err
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize("argv", [
    ["run", "--prompt", "hi", "--budget", NINES], ["run", "--prompt", "hi", "--host-budget", NINES + "GiB"],
    ["serve", "--max-body-size", NINES], ["configure", "qwen3-30b-a3b", "--trace", "x.npz", "--budget", NINES],
    ["run", "--prompt", "hi", "--budget", "2000000TiB"],
])
def test_huge_sizes_are_one_line(argv, capsys):
    one_line_status_2(argv, capsys, "1 EiB")


def gguf_bytes(fields: list[bytes]) -> bytes:
    """A GGUF v3 header with no tensors and the given encoded key/value pairs."""
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields)) + b"".join(fields)


def key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


ALIGNMENTS = {"the string 0": struct.pack("<IQ", 8, 1) + b"0", "0.5": struct.pack("<If", 6, 0.5),
              "0": struct.pack("<II", 4, 0), "48": struct.pack("<II", 4, 48)}


@pytest.mark.parametrize("value", ALIGNMENTS.values(), ids=ALIGNMENTS.keys())
def test_a_bad_gguf_alignment_is_a_format_error(tmp_path, value, capsys):
    path = tmp_path / "bad.gguf"
    path.write_bytes(gguf_bytes([key("general.alignment") + value]))
    with pytest.raises(ModelFormatError, match="general.alignment"):
        GgufFile(path)
    one_line_status_2(["run", str(path), "--device", "cpu", "--prompt", "hi"], capsys, "alignment")


def test_gguf_arrays_nested_deep_are_a_format_error(tmp_path):
    nested = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * DEEP + struct.pack("<IQ", 4, 0)
    path = tmp_path / "deep.gguf"
    path.write_bytes(gguf_bytes([key("general.deep") + nested]))
    with pytest.raises(ModelFormatError, match="nest"):
        GgufFile(path)


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_model_json_nested_deep_is_one_line(tmp_path, name, capsys):
    folder = shutil.copytree(DEMO_MODEL, tmp_path / "model")
    (folder / name).write_text("[" * DEEP + "]" * DEEP)
    one_line_status_2(["run", str(folder), "--device", "cpu", "--prompt", "hi"], capsys, name)


def models_answer(payload) -> httpx.Client:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    return httpx.Client(transport=transport, base_url="http://127.0.0.1:1/v1")


@pytest.mark.parametrize("payload", [{"data": [1]}, {"data": [{"object": "model"}]}, {"data": [{"id": 5}]},
                                     {"data": "abc"}, {"data": None}, [1], b"[" * DEEP + b"]" * DEEP])
def test_a_malformed_model_list_is_a_remote_error(payload):
    with pytest.raises(RemoteError):
        pick_model(fetch_models(models_answer(payload), "http://127.0.0.1:1/v1"), None, "http://127.0.0.1:1/v1")


def test_good_cards_beside_bad_ones_are_kept():
    cards = fetch_models(models_answer({"data": [1, {"id": "m", "max_model_len": "x"}]}), "http://127.0.0.1:1/v1")
    assert [card["id"] for card in cards] == ["m"]


LOOPS = {
    "nested ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "nested output": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "a huge string": "{{ 'x' * 100000 * 100000 }}",
    "a huge power": "{{ 7 ** 123456789 }}",
    "a range past the sandbox": "{% for i in range(10 ** 9) %}{% endfor %}",
}


@pytest.mark.parametrize("source", LOOPS.values(), ids=LOOPS.keys())
def test_a_template_that_runs_away_is_stopped(source):
    start = time.monotonic()
    with pytest.raises(TokenizerError, match="was stopped"):
        ChatTemplate(source, "test").render([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert time.monotonic() - start < 15


def test_templates_keep_their_ranges():
    source = "{% for i in range(3)|reverse %}{{ i }}{% endfor %}{{ range(5)|length }}{{ range(4)[2] }}" \
             "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{% endfor %}"
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert ChatTemplate(source, "t").render(messages, add_generation_prompt=False) == "210521/22/2"


def test_a_runaway_template_in_a_model_folder_is_one_line(tmp_path, capsys):
    folder = shutil.copytree(DEMO_MODEL, tmp_path / "model")
    (folder / "chat_template.jinja").write_text(LOOPS["nested ranges"])
    one_line_status_2(["run", str(folder), "--device", "cpu", "--chat", "--prompt", "hi"], capsys, "was stopped")
