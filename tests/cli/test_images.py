"""`wisp run --chat --image PATH` and `wisp chat`'s /image: the same tokens as the engine gives for the same image;
a bad image is one line naming the image and the limit, exit status 2."""

import io
import json

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.cli import main
from engine.cli.chat_repl import ChatSession
from tests.vision.tiny_vl import encoded_image, write_tiny_vl

MAX_TOKENS = 6


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory):
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl_cli"))


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pictures")
    paths = [folder / "a.png", folder / "b.jpg"]
    paths[0].write_bytes(encoded_image(70, 50, 1))
    paths[1].write_bytes(encoded_image(40, 120, 2, fmt="JPEG"))
    return paths


def engine_tokens(folder, paths, prompt) -> list[int]:
    parts = [{"type": "image", "image": path.read_bytes()} for path in paths] + [{"type": "text", "text": prompt}]
    sampling = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS)
    with Engine(EngineOptions(model=str(folder), device="cpu", dtype="float32")) as engine:
        return list(engine.generate(GenerateRequest(messages=({"role": "user", "content": parts},),
                                                    sampling=sampling)).token_ids)


def run(folder, *options) -> list[str]:
    return ["run", str(folder), "--device", "cpu", "--dtype", "float32", "--max-tokens", str(MAX_TOKENS),
            "--temperature", "0", *options]


def test_run_with_images_gives_the_engines_tokens(vl_dir, pictures, capsys):
    assert main(run(vl_dir, "--chat", "--image", str(pictures[0]), "--image", str(pictures[1]), "--prompt",
                    "def fib", "--json")) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["token_ids"] == engine_tokens(vl_dir, pictures, "def fib")
    assert result["token_ids"] and result["stats"]["prompt_tokens"] > 10


@pytest.mark.parametrize("make, words", [
    (lambda folder: folder / "missing.png", "--image {path}: cannot read it"),
    (lambda folder: (folder / "doc.txt").write_text("hello") and folder / "doc.txt",
     "image 0 is not an image Wisp reads"),
])
def test_a_bad_image_is_one_line_and_exit_2(vl_dir, tmp_path, capsys, make, words):
    path = make(tmp_path)
    assert main(run(vl_dir, "--chat", "--image", str(path), "--prompt", "hi")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words.format(path=path) in err


def test_image_without_chat_is_refused(vl_dir, pictures, capsys):
    assert main(run(vl_dir, "--image", str(pictures[0]), "--prompt", "hi")) == 2
    assert "--image goes into a user turn of a chat: add --chat" in capsys.readouterr().err


def test_a_model_without_a_tower_says_so(tiny_model_dir, pictures, capsys):
    assert main(["run", str(tiny_model_dir("qwen3_moe")), "--device", "cpu", "--chat", "--image", str(pictures[0]),
                 "--prompt", "hi", "--max-tokens", "2"]) == 2
    assert "this model does not take images (qwen3_moe)" in capsys.readouterr().err


def test_chat_image_attaches_to_the_next_message(vl_dir, pictures, tmp_path):
    err = io.StringIO()
    sampling = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    with Engine(EngineOptions(model=str(vl_dir), device="cpu", dtype="float32")) as engine:
        chat = ChatSession(engine, sampling, out=io.StringIO(), err=err)
        chat.handle(f"/image {pictures[0]}")
        chat.handle("/image nowhere.png")
        finish = chat.stream(GenerateRequest(messages=tuple(chat.messages()) + (
            {"role": "user", "content": [{"type": "image", "image": pictures[0].read_bytes()},
                                         {"type": "text", "text": "def fib"}]},), sampling=sampling))
        chat.handle("def fib")
        chat.handle(f"/save {tmp_path / 'chat.json'}")
    notes = err.getvalue()
    assert "[image 1 attached to the next message" in notes and "cannot read 'nowhere.png'" in notes
    assert chat.turns[1]["content"] == finish.text and chat.images == []
    assert chat.turns[0]["content"][0]["type"] == "image"
    assert json.loads((tmp_path / "chat.json").read_text())[0]["content"][0]["type"] == "image"
