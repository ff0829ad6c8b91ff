"""Images in what is pasted or dropped (Qt's QMimeData): image files by their URLs, or an image itself (a
screenshot on the clipboard, encoded as PNG). GUI thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData
from PySide6.QtGui import QImage, QPixmap

from app.chat.images import ImageRefused, checked_image, read_image


@dataclass
class OfferedImages:
    images: list[bytes] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a line for each file that is not attached


def has_offered_files(mime: QMimeData) -> bool:
    """Does the data hold local files, or an image without text? (Office programs copy text with a picture of it:
    the message box takes that as the text.)"""
    return any(url.isLocalFile() for url in mime.urls()) or (mime.hasImage() and not mime.hasText())


def offered_images(mime: QMimeData) -> OfferedImages:
    offered = OfferedImages()
    paths = [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
    if paths:
        for path in paths:
            add(offered, lambda path=path: read_image(path))
    elif mime.hasImage() and not mime.hasText():
        add(offered, lambda: checked_image(png_bytes(mime.imageData()), "the pasted image"))
    return offered


def add(offered: OfferedImages, read) -> None:
    try:
        offered.images.append(read())
    except ImageRefused as err:
        offered.problems.append(str(err))


def png_bytes(image: QImage | QPixmap) -> bytes:
    """The image encoded as PNG (b"" for a null image)."""
    if isinstance(image, QPixmap):
        image = image.toImage()
    if not isinstance(image, QImage) or image.isNull():
        return b""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data)


def paths_of_images(paths: list[str]) -> OfferedImages:
    """Files chosen in the file dialog."""
    offered = OfferedImages()
    for path in paths:
        add(offered, lambda path=path: read_image(Path(path)))
    return offered
