"""The images a request carries: found in its messages' content parts, checked against the limits before anything
is queued (count, encoded size, a readable header, pixel count), and decoded in full off the engine thread."""

from __future__ import annotations

import base64
import io
import warnings

from PIL import Image

from engine.errors import RequestError

MAX_IMAGES = 16  # per request
MAX_IMAGE_BYTES = 20 * 1000 * 1000  # encoded
MAX_MEGAPIXELS = 50  # before resizing
MAX_ASPECT_RATIO = 200  # the longer side over the shorter: what the processor's resize rule takes
FORMATS = ("PNG", "JPEG", "WEBP", "GIF")  # a GIF's first frame


def image_parts(messages) -> list[bytes]:
    """The encoded bytes of every {"type": "image", "image": bytes} part, in the order the prompt places them."""
    found = []
    for message in messages or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, (list, tuple)):
            found.extend(part.get("image") for part in content
                         if isinstance(part, dict) and part.get("type") == "image")
    return found


def open_image(data: object, index: int) -> Image.Image:
    """Pillow's lazy open (the header only): RequestError naming the image for anything but a PNG, JPEG, WebP or
    GIF within the limits."""
    field = f"image {index}"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RequestError(f"{field} must be the encoded file's bytes, got {type(data).__name__}", field)
    if len(data) > MAX_IMAGE_BYTES:
        raise RequestError(f"{field} is {len(data) / 1e6:.1f} MB encoded, more than the limit of "
                           f"{MAX_IMAGE_BYTES // 1000000} MB", field)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the pixel limit below is lower
            image = Image.open(io.BytesIO(bytes(data)), formats=FORMATS)
    except Image.DecompressionBombError:
        raise RequestError(f"{field} has more than {MAX_MEGAPIXELS} megapixels, the limit", field) from None
    except Exception:  # noqa: BLE001 - Pillow raises many types for unreadable data
        raise RequestError(f"{field} is not an image Wisp reads (PNG, JPEG, WebP or GIF)", field) from None
    megapixels = image.width * image.height / 1e6
    if megapixels > MAX_MEGAPIXELS:
        raise RequestError(f"{field} has {megapixels:.1f} megapixels, more than the limit of {MAX_MEGAPIXELS}", field)
    if max(image.size) > MAX_ASPECT_RATIO * max(1, min(image.size)):
        raise RequestError(f"{field} is {image.width}x{image.height}: one side is more than {MAX_ASPECT_RATIO} times "
                           "the other, the limit", field)
    return image


def check_images(images: list) -> None:
    """The cheap checks, on the caller's thread: count, bytes, header, pixel count."""
    if len(images) > MAX_IMAGES:
        raise RequestError(f"the request has {len(images)} images, more than the limit of {MAX_IMAGES}", "messages")
    for index, data in enumerate(images):
        open_image(data, index)


def decode_image(data: bytes, index: int) -> Image.Image:
    """The whole image decoded (a GIF's first frame): RequestError naming the image if it is truncated or corrupt."""
    image = open_image(data, index)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.seek(0)
            image.load()
    except Exception as err:  # noqa: BLE001 - truncated or corrupt data
        raise RequestError(f"image {index} is truncated or corrupt ({type(err).__name__}: {err})"[:200],
                           f"image {index}") from None
    return image


def with_data_urls(messages) -> list:
    """The messages with each {"type": "image", "image": bytes} part as OpenAI's image_url part (a data URL of the
    image's own type), for a remote OpenAI-compatible server, which answers for its model."""
    converted = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, (list, tuple)):
            content = [{"type": "image_url", "image_url": {"url": data_url(part["image"])}}
                       if isinstance(part, dict) and part.get("type") == "image" else part for part in content]
            message = {**message, "content": content}
        converted.append(message)
    return converted


def data_url(data: bytes) -> str:
    """data:<the image's MIME type>;base64,... (the request checks let only PNG, JPEG, WebP and GIF through)."""
    with Image.open(io.BytesIO(bytes(data))) as picture:
        mime = Image.MIME.get(picture.format or "", "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(bytes(data)).decode('ascii')}"


def refuse_images(messages, model_type: str) -> None:
    """A model without a tower answers a request with images with one clear line."""
    if image_parts(messages):
        raise RequestError(f"this model does not take images ({model_type})", "messages")
