"""Render the app icon (resources/icons/hicolor/scalable/apps/wisp-desktop.svg) to the PNG sizes of the
freedesktop hicolor theme, plus wisp-desktop.ico (Windows) and wisp-desktop.icns (macOS) for the bundle.

    QT_QPA_PLATFORM=offscreen python packaging/render_icons.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
HICOLOR = ICONS / "hicolor"
SOURCE = HICOLOR / "scalable" / "apps" / "wisp-desktop.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def main() -> int:
    application = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"{SOURCE}: not a valid SVG")
    for size in PNG_SIZES:
        folder = HICOLOR / f"{size}x{size}" / "apps"
        folder.mkdir(parents=True, exist_ok=True)
        render(renderer, size).save(str(folder / "wisp-desktop.png"))
    render(renderer, 256).save(str(ICONS / "wisp-desktop.ico"))
    render(renderer, 512).save(str(ICONS / "wisp-desktop.icns"))
    del application
    return 0


if __name__ == "__main__":
    sys.exit(main())
