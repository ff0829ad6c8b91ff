"""The MV-WSA curve's x axis keeps its three ticks apart, however narrow the range of expert shares (a large
budget leaves experts a share of 0.3% to 1.2%), and the one-split caption is drawn away from the split's dot."""

from PySide6.QtGui import QColor

from app.memory.throughput_curve_widget import ThroughputCurveWidget, share_labels


def test_narrow_ranges_get_the_decimals_they_need():
    assert share_labels(0.003, 0.012) == ["0.3%", "0.8%", "1.2%"]
    assert share_labels(0.1, 0.9) == ["10%", "50%", "90%"]
    assert len(set(share_labels(0.05, 0.0501))) == 3


def test_the_one_split_caption_leaves_the_dot_clear(qtbot):
    widget = ThroughputCurveWidget()
    qtbot.addWidget(widget)
    widget.set_colors(QColor("#00aa00"), QColor("#000000"), QColor("#0000ff"), QColor("#ff0000"))
    widget.resize(320, 160)
    widget.set_curve([(0.2, 50.0)], 0.2)
    assert "Only one split" in widget.caption
    image = widget.grab().toImage()
    red = [(x, y) for x in range(image.width()) for y in range(image.height())
           if image.pixelColor(x, y).red() > 200 and image.pixelColor(x, y).blue() < 80]
    assert red, "the current split's dot is drawn"
    xs, ys = [x for x, _ in red], [y for _, y in red]
    text_near_dot = [(x, y) for x in range(max(min(xs) - 6, 0), min(max(xs) + 7, image.width()))
                     for y in range(max(min(ys) - 6, 0), min(max(ys) + 7, image.height()))
                     if image.pixelColor(x, y).blue() > 150 and image.pixelColor(x, y).red() < 120]
    assert not text_near_dot
