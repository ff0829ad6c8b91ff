"""Images over the server's APIs -> the engine's {"type": "image", "image": bytes} parts: OpenAI's `image_url`
parts (data URLs; http(s) URLs only with `wisp serve --allow-image-urls`, fetched off the event loop with a size
limit and a timeout) and Ollama's `images` (a list of base64 strings). A model without a vision tower answers a
400 "this model does not take images"."""

from __future__ import annotations

import asyncio
import base64
import binascii
import urllib.request

from engine.server.api_errors import bad_request
from engine.vision.image_input import MAX_IMAGE_BYTES

URL_TIMEOUT_S = 10.0


def refuse_without_tower(sees_images: bool, model_id: str, field: str) -> None:
    if not sees_images:
        raise bad_request(f"this model does not take images (model '{model_id}' has no vision tower)", field)


def decode_base64(text: object, field: str) -> bytes:
    if not isinstance(text, str):
        raise bad_request("an image is a base64 string", field)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("the image is not valid base64", field) from None


def data_url_bytes(url: str, field: str) -> bytes:
    """data:image/...;base64,XXXX -> the file's bytes."""
    header, comma, data = url.partition(",")
    if not comma or not header.startswith("data:") or not header.endswith(";base64"):
        raise bad_request("an image_url is a data URL (data:image/png;base64,...)", field)
    return decode_base64(data, field)


def image_url_of(part) -> object:
    """The URL of an OpenAI image_url part: {"image_url": {"url": ...}} or {"image_url": "..."}."""
    value = (part.model_extra or {}).get("image_url")
    return value.get("url") if isinstance(value, dict) else value


def is_remote(url: object) -> bool:
    return isinstance(url, str) and url.lower().startswith(("http://", "https://"))


def fetch_image(url: str, field: str, timeout_s: float = URL_TIMEOUT_S) -> bytes:
    """Blocking: the bytes at an http(s) URL, at most engine.vision's encoded-size limit (a worker thread)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - http(s) only, checked above
            data = response.read(MAX_IMAGE_BYTES + 1)
    except Exception as error:  # noqa: BLE001 - URLError, timeouts, bad status lines
        raise bad_request(f"cannot fetch the image at {url[:100]} ({error})"[:300], field) from None
    if len(data) > MAX_IMAGE_BYTES:
        raise bad_request(f"the image at {url[:100]} is more than the limit of {MAX_IMAGE_BYTES // 1000000} MB", field)
    return data


async def fetch_remote_images(messages, allow_urls: bool, served) -> dict[tuple[int, int], bytes]:
    """(message, part) -> the fetched bytes of each http(s) image_url part, fetched concurrently in worker threads;
    400 for any such part unless allow_urls, and for any image to a model without a tower."""
    wanted = {}
    for index, message in enumerate(messages):
        for number, part in enumerate(message.content if isinstance(message.content, list) else ()):
            url = image_url_of(part) if part.type == "image_url" else None
            field = f"messages.{index}.content.{number}"
            if part.type == "image_url":
                refuse_without_tower(served.sees_images, served.id, field)
            if is_remote(url):
                field += ".image_url"
                if not allow_urls:
                    raise bad_request("image URLs are not fetched: send the image as a data URL, or start the "
                                      "server with --allow-image-urls", field)
                wanted[(index, number)] = (url, field)
    fetched = await asyncio.gather(*(asyncio.to_thread(fetch_image, url, field) for url, field in wanted.values()))
    return dict(zip(wanted, fetched))
