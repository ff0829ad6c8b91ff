"""A model chosen in the picker that needs a larger budget than the one set: Load is refused before the serving
model is touched, the offer "Load at the minimum" stays next to the slider until it is used, and using it loads
the model at its minimum; the picker offers the same directly. The serving model keeps the budget set live."""

from PySide6.QtCore import Qt

from engine.api import EngineOptions, budget_marks, format_bytes

MiB = 1024**2


def minimum(model) -> int:
    return budget_marks(EngineOptions(model=model, device="cpu", experts="paged")).minimum


def type_budget(qtbot, window, num_bytes: int) -> None:
    """Type a size in MiB into the budget box and press Enter; wait until the engine applied it."""
    slider = window.memory_panel.budget_slider
    slider.size_edit.setText(f"{num_bytes // MiB} MiB")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000):
        qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.budget.is_pending, timeout=10_000)


def picker_on_the_demo(qtbot, window):
    with qtbot.waitSignal(window.window_actions.choose_model.triggered):
        qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    picker = window._picker
    qtbot.waitUntil(lambda: picker.model.rowCount() > 0, timeout=20_000)
    row = next(i for i, row in enumerate(picker.model.rows) if row.entry.source == "demo")
    picker.select_row(row)
    return picker, picker.model.row(row)


def test_load_at_the_minimum_offered_after_a_refused_load_works(qtbot, start_app, tiny_model):
    demo_minimum = minimum(None)
    budget = (max(minimum(tiny_model), demo_minimum // 2) // MiB + 1) * MiB  # whole MiB: typed exactly
    assert budget < demo_minimum
    window = start_app()
    engine, slider = window.loader.engine, window.memory_panel.budget_slider
    type_budget(qtbot, window, budget + 8 * MiB)
    type_budget(qtbot, window, budget)  # applied live: the tiny model now runs at `budget`
    picker, row = picker_on_the_demo(qtbot, window)
    assert row.fit.startswith("needs a larger budget") and row.minimum_bytes == demo_minimum
    loadings = []
    window.loader.loading.connect(loadings.append)
    with qtbot.waitSignal(window.loader.budget_refused, timeout=30_000):
        qtbot.mouseClick(picker.load_button, Qt.MouseButton.LeftButton)
    qtbot.wait(1500)  # what used to follow the refusal: the serving model loaded again, the offer gone
    assert slider.offer_button.isVisible() and "Not loaded" in slider.state_label.text()
    assert window.loader.engine is engine and not window.loader.is_loading
    assert engine.stats().plan.budget_bytes == budget
    assert loadings == ["Loading the demo model…"]

    with qtbot.waitSignal(window.loader.ready, timeout=60_000):
        qtbot.mouseClick(slider.offer_button, Qt.MouseButton.LeftButton)
    assert window.loader.request.model is None
    assert window.loader.engine.stats().plan.budget_bytes == slider.budget_bytes == demo_minimum
    assert not slider.offer_button.isVisible()


def test_the_picker_itself_offers_the_minimum(qtbot, start_app, tiny_model):
    demo_minimum = minimum(None)
    window = start_app(budget_bytes=max(minimum(tiny_model), demo_minimum // 2) + MiB)
    picker, row = picker_on_the_demo(qtbot, window)
    assert picker.minimum_button.isVisible()
    assert picker.minimum_button.text() == f"Load at the minimum ({format_bytes(demo_minimum)})"
    with qtbot.waitSignal(window.loader.ready, timeout=60_000):
        qtbot.mouseClick(picker.minimum_button, Qt.MouseButton.LeftButton)
    assert window.loader.request.model is None
    assert window.loader.engine.stats().plan.budget_bytes == demo_minimum
