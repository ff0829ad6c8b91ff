"""The Stop button's icon reads as a stop sign, not as an empty checkbox: a filled shape with a mark inside."""

from PySide6.QtGui import QColor

from app.icons import icon


def _pixel(image, fx: float, fy: float) -> QColor:
    return image.pixelColor(int(image.width() * fx), int(image.height() * fy))


def test_stop_icon_is_filled_around_its_mark(qapp):
    image = icon("stop").pixmap(48, 48).toImage()
    ring = _pixel(image, 0.25, 0.5)  # between the edge and the inner square
    centre = _pixel(image, 0.5, 0.5)
    assert ring.alpha() > 200, "the icon's body is filled"
    assert centre.alpha() > 200 and centre.rgb() != ring.rgb(), "a mark of another colour in the middle"
