"""Images attached to a message: which files are images Wisp sends (by their bytes, not their names), the size
limit, and the encodings a request and an export need. Plain Python."""

from __future__ import annotations

import base64
from pathlib import Path

MAX_IMAGE_BYTES = 20 * 1024 * 1024
# The leading bytes of each format Wisp sends, and its MIME type; WebP is RIFF....WEBP.
SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
              (b"GIF89a", "image/gif"), (b"BM", "image/bmp"))
FORMAT_NAMES = "PNG, JPEG, GIF, WebP or BMP"
FILE_FILTER = "Images (*.png *.jpg *.jpeg *.gif *.webp *.bmp)"
NO_IMAGES = "The loaded model does not take images (load a vision-language model to send them)"


class ImageRefused(ValueError):
    """A file the composer does not attach, with a line that says why."""


def image_mime(data: bytes) -> str | None:
    """The image's MIME type from its leading bytes, or None when it is not an image Wisp sends."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for signature, mime in SIGNATURES if data.startswith(signature)), None)


def checked_image(data: bytes, name: str) -> bytes:
    """`data` when it is an image within the limit; else ImageRefused naming the file and the rule."""
    check_size(len(data), name)
    if image_mime(data) is None:
        raise ImageRefused(f"{name} is not an image ({FORMAT_NAMES} files can be attached)")
    return data


def check_size(num_bytes: int, name: str) -> None:
    if num_bytes > MAX_IMAGE_BYTES:
        raise ImageRefused(f"{name} is {num_bytes / 1024**2:.1f} MB; an image may be at most "
                           f"{MAX_IMAGE_BYTES // 1024**2} MB")


def read_image(path: Path) -> bytes:
    """The file's bytes when it is an image within the limit (the size is checked before the file is read)."""
    try:
        check_size(path.stat().st_size, path.name)
        return checked_image(path.read_bytes(), path.name)
    except OSError as err:
        raise ImageRefused(f"{path.name} cannot be read ({err.strerror or err})") from None


def data_url(data: bytes) -> str:
    return f"data:{image_mime(data) or 'application/octet-stream'};base64,{base64.b64encode(data).decode('ascii')}"
