"""The request contract for images: content parts, the limits (each a RequestError naming the image and the
limit), a truncated image failing its request alone while another stream finishes, a model without a tower
refusing images, and the prefix cache keying image tokens by the image's bytes."""

import io

import pytest
from PIL import Image

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import RequestError
from engine.kv.block_manager import BlockManager
from engine.runtime.sequence import Sequence
from engine.vision import image_input
from engine.vision.prompt_images import place_images
from tests.vision.tiny_vl import encoded_image

GREEDY = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)
PICTURE = encoded_image(70, 50, 1)


def image_message(*images: bytes, text: str = "def fib(n):") -> tuple[dict, ...]:
    parts = [{"type": "image", "image": data} for data in images]
    return ({"role": "user", "content": [*parts, {"type": "text", "text": text}]},)


def refusal(messages) -> str:
    with pytest.raises(RequestError) as error:
        GenerateRequest(messages=messages)
    return str(error.value)


def test_text_and_image_parts_are_accepted():
    GenerateRequest(messages=image_message(PICTURE, encoded_image(30, 30, 2, fmt="JPEG")))


@pytest.mark.parametrize("part, words", [
    ({"type": "image", "image": "aGVsbG8="}, "image 0 must be the encoded file's bytes"),
    ({"type": "image_url", "image_url": {"url": "x"}}, "messages.0.content.0 must be"),
    ({"type": "text", "text": 3}, "messages.0.content.0.text must be text"),
])
def test_malformed_parts_are_refused(part, words):
    assert words in refusal(({"role": "user", "content": [part]},))


def test_not_an_image_names_the_image():
    assert "image 1 is not an image Wisp reads (PNG, JPEG, WebP or GIF)" in refusal(
        image_message(PICTURE, b"%PDF-1.7 not a picture"))


def test_too_many_images(monkeypatch):
    assert "17 images, more than the limit of 16" in refusal(image_message(*[PICTURE] * 17))


def test_too_many_bytes(monkeypatch):
    monkeypatch.setattr(image_input, "MAX_IMAGE_BYTES", 1000)
    message = refusal(image_message(encoded_image(200, 200, 3)))
    assert "image 0 is" in message and "MB encoded, more than the limit of" in message


def test_too_many_megapixels():
    out = io.BytesIO()
    Image.new("L", (10000, 6000)).save(out, format="PNG")  # 60 megapixels, a small file
    assert "image 0 has 60.0 megapixels, more than the limit of 50" in refusal(image_message(out.getvalue()))


def test_too_narrow():
    assert "one side is more than 200 times the other" in refusal(image_message(encoded_image(1000, 4, 5)))


def test_a_truncated_image_fails_its_request_alone(tiny_vl_dir):
    truncated = PICTURE[: len(PICTURE) // 2]
    good = GenerateRequest(messages=image_message(encoded_image(40, 120, 2)), sampling=GREEDY)
    with Engine(EngineOptions(model=str(tiny_vl_dir), device="cpu", dtype="float32")) as engine:
        alone = engine.generate(good).token_ids
        again = GenerateRequest(messages=good.messages, sampling=GREEDY)
        handles = [engine.submit(again), engine.submit(GenerateRequest(messages=image_message(truncated)))]
        finished, failed = (handle.result() for handle in handles)
    assert finished.reason == "length" and finished.token_ids == alone
    assert failed.reason == "error" and "image 0 is truncated or corrupt" in failed.error


def test_a_model_without_a_tower_refuses_images(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as engine:
        assert not engine.sees_images
        finish = engine.generate(GenerateRequest(messages=image_message(PICTURE), sampling=GREEDY))
    assert finish.reason == "error" and finish.error == "this model does not take images (qwen3_moe)"


def sequence_with_image(image: bytes, block_size: int) -> Sequence:
    ids, images = place_images([1, 2, 3, 4, 9] + [5, 6, 7] * 4, [None], [(1, 4, 4)], [image], image_token_id=9,
                               merge_size=2)
    return Sequence(request_id=str(id(image)), token_ids=ids, sampling=GREEDY, images=images)


def test_the_prefix_cache_keys_image_tokens_by_the_image_bytes():
    manager = BlockManager(num_blocks=32, block_size=4)
    first = sequence_with_image(PICTURE, 4)
    manager.allocate(first)
    manager.deallocate(first)
    other = sequence_with_image(encoded_image(70, 50, 99), 4)
    assert other.token_ids == first.token_ids
    manager.allocate(other)
    assert other.num_cached_tokens == 4  # the block before the image only
    manager.deallocate(other)
    same = sequence_with_image(bytes(PICTURE), 4)
    manager.allocate(same)
    assert same.num_cached_tokens == 16  # every full block before the last token (which is always recomputed)


def test_a_remote_server_gets_image_url_parts_with_data_urls():
    """engine.backends.remote sends OpenAI's image_url parts, each a data URL of the image's own type."""
    import base64

    from engine.backends.remote import request_body

    jpeg = encoded_image(30, 30, 2, fmt="JPEG")
    _, body = request_body(GenerateRequest(messages=image_message(PICTURE, jpeg)), "m", False)
    first, second, text = body["messages"][0]["content"]
    assert first == {"type": "image_url",
                     "image_url": {"url": "data:image/png;base64," + base64.b64encode(PICTURE).decode()}}
    assert second["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert base64.b64decode(second["image_url"]["url"].split(",", 1)[1]) == jpeg
    assert text == {"type": "text", "text": "def fib(n):"}
