"""Small things a person notices: sizes read the same everywhere (the picker, the slider, the engine's refusal),
the typed-budget hint names the model's own minimum, Stop looks disabled when it is, code mode shows no empty
attachments box, and the picker's fit column stays on one line."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.engine_api import format_bytes
from engine.api import EngineOptions, budget_marks
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle

MiB = 1024**2


def pixels_near(widget, color: QColor, tolerance: int = 40) -> int:
    image = widget.grab().toImage()
    return sum(1 for x in range(image.width()) for y in range(image.height())
               if all(abs(a - b) <= tolerance for a, b in zip(image.pixelColor(x, y).getRgb()[:3], color.getRgb()[:3])))


def test_sizes_and_the_minimum_read_the_same_in_the_slider_and_the_engine(qtbot, start_app, tiny_model):
    minimum = budget_marks(EngineOptions(model=tiny_model, device="cpu", experts="paged")).minimum
    window = start_app()
    slider = window.memory_panel.budget_slider
    qtbot.waitUntil(lambda: len(slider.marks.texts) == 2, timeout=10_000)
    assert slider.marks.texts[0] == f"minimum {format_bytes(minimum)}"
    slider.size_edit.setText(f"{(minimum - 40 * MiB) // MiB} MiB")
    qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return)
    assert slider.state_label.text() == (f"Type a size from {format_bytes(minimum)} (this model's minimum) to "
                                         f"{format_bytes(slider._range.maximum)}.")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000) as refused:
        slider.request(minimum - 40 * MiB)  # a drag past the mark: the engine refuses it, in the same units
    assert f"the minimum is {format_bytes(minimum)}" in refused.args[0].error
    assert "0.00 GiB" not in slider.state_label.text() and format_bytes(minimum) in slider.state_label.text()


def test_stop_looks_disabled_and_code_mode_shows_no_empty_attachment_box(qtbot, start_app, tmp_path):
    window = start_app()
    stop, danger = window.chat.composer.stop_button, window.theme.color("danger")
    assert not stop.isEnabled() and pixels_near(stop, danger) == 0
    use_greedy_sampling(window, max_tokens=300)
    with qtbot.waitSignal(window.bridge.text_arrived, timeout=30_000):
        type_and_send(qtbot, window, "a long story")
    assert stop.isEnabled() and pixels_near(stop, danger) > 0
    qtbot.mouseClick(stop, Qt.MouseButton.LeftButton)
    wait_until_idle(qtbot, window)

    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    context = window.chat.code_context
    assert context.isVisible() and not context.file_list.isVisible()
    (tmp_path / "notes.py").write_text("x = 1\n")
    context.attach([tmp_path / "notes.py"])
    qtbot.waitUntil(context.file_list.isVisible, timeout=5000)
    qtbot.mouseClick(context.clear_button, Qt.MouseButton.LeftButton)
    assert not context.file_list.isVisible()


def test_the_pickers_fit_column_stays_on_one_line(qtbot, start_app, tiny_model):
    window = start_app(budget_bytes=300 * MiB, is_autoload=False, is_ready_awaited=False)
    qtbot.waitUntil(lambda: window.memory_panel.budget_slider.has_range, timeout=10_000)
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=20_000):
        picker.add_path(tiny_model)
    table, column = picker.table, picker.model.columnCount() - 1
    assert not table.wordWrap()
    fits = [picker.model.row(row).fit for row in range(picker.model.rowCount())]
    assert any(fit.startswith("needs a larger budget") for fit in fits)  # the demo, at this budget
    widest = max(table.fontMetrics().horizontalAdvance(fit) for fit in fits)
    assert table.columnWidth(column) >= widest
