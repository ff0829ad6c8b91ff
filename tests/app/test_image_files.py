"""Which files the composer takes as images (by their bytes), and the store that keeps a conversation's images:
one file per distinct image, named by its SHA-256."""

import hashlib

import pytest
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QColor, QImage

from app.chat.image_store import ImageStore
from app.chat.images import ImageRefused, checked_image, data_url, image_mime, read_image


# Qt's own plugins write PNG, JPEG and BMP; a GIF's and a WebP's first bytes, as their encoders write them
HEADERS = {"GIF": b"GIF89a\x03\x00\x02\x00\x80\x00\x00", "WEBP": b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00"}


def encoded(fmt: str) -> bytes:
    if fmt in HEADERS:
        return HEADERS[fmt]
    image = QImage(3, 2, QImage.Format.Format_RGB32)
    image.fill(QColor(10, 200, 30))
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    assert image.save(buffer, fmt)
    return bytes(data)


@pytest.mark.parametrize("fmt, mime", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                       ("WEBP", "image/webp"), ("BMP", "image/bmp")])
def test_images_are_known_by_their_bytes_not_their_names(tmp_path, fmt, mime):
    data = encoded(fmt)
    assert image_mime(data) == mime
    (tmp_path / "picture.txt").write_bytes(data)
    assert read_image(tmp_path / "picture.txt") == data
    assert data_url(data).startswith(f"data:{mime};base64,")


def test_other_files_are_refused_with_their_name():
    for data in (b"hello", b"%PDF-1.7", b"RIFF\0\0\0\0WAVEfmt ", b""):
        with pytest.raises(ImageRefused, match="report.pdf is not an image"):
            checked_image(data, "report.pdf")


def test_a_missing_file_is_refused_with_why(tmp_path):
    with pytest.raises(ImageRefused, match="gone.png cannot be read"):
        read_image(tmp_path / "gone.png")


def test_the_store_keeps_each_image_once_by_its_digest(tmp_path):
    store = ImageStore(tmp_path / "images")
    data = encoded("PNG")
    digest = store.put(data)
    assert digest == hashlib.sha256(data).hexdigest() and store.put(data) == digest
    assert store.get(digest) == data and len(list((tmp_path / "images").rglob("*"))) == 2  # a folder and a file
    assert store.get("../" + digest[3:]) is None and store.get("0" * 64) is None
    store.remove_unused({digest})
    assert store.get(digest) == data
    store.remove_unused(set())
    assert store.get(digest) is None
