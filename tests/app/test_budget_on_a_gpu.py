"""The budget slider on a (simulated) 24 GiB GPU: every budget across its range reaches the engine, by mouse,
keyboard and typed size. The hardware report is injected; the engine itself runs the tiny model on the CPU."""

import ast
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QStyle, QStyleOptionSlider

from app.memory.budget_scale import STEPS, bytes_at
from app.settings import SettingsStore
from tests.app.conftest import GiB
from tests.app.driving import error_dialogs

MiB = 1024**2
ROOT = Path(__file__).resolve().parents[2]
GPU_TOTAL, GPU_FREE = 24 * GiB, 23 * GiB
REPLAN_TIMEOUT_MS = 30_000


def simulated_gpu():
    from engine.api import HardwareInfo
    from engine.system.hardware import GpuInfo

    return HardwareInfo(torch_version="2.13.0", cuda_version="12.8",
                        gpus=(GpuInfo(0, "Simulated RTX 4090", GPU_TOTAL, GPU_FREE),),
                        host_total_bytes=64 * GiB, host_available_bytes=48 * GiB, cpu_count=2)


@pytest.fixture
def gpu_window(monkeypatch, start_app):
    import engine.api

    monkeypatch.setattr(engine.api, "detect_hardware", simulated_gpu)
    window = start_app(budget_bytes=None)  # the default budget from the GPU: 90% of its free memory
    assert window.loader.engine.stats().plan.budget_bytes == int(GPU_FREE * 0.9) // MiB * MiB
    return window


def replan(qtbot, window, act):
    """Do `act` and return the PlanEvent it causes; fails on a crash dialog or a Python error in a slot."""
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=REPLAN_TIMEOUT_MS) as changed:
        act()
    assert not error_dialogs(window)
    return changed.args[0]


def assert_landed(qtbot, window, event, expected: int) -> None:
    slider = window.memory_panel.budget_slider
    assert event.error is None, event.error
    assert event.new.budget_bytes == expected == slider.budget_bytes
    assert window.loader.engine.stats().plan.budget_bytes == expected
    assert window.settings.budget_bytes == expected
    assert SettingsStore(window.paths.settings_file).load().budget_bytes == expected  # saved at once


def handle_center(slider) -> QPoint:
    option = QStyleOptionSlider()
    slider.initStyleOption(option)
    return slider.style().subControlRect(QStyle.ComplexControl.CC_Slider, option,
                                         QStyle.SubControl.SC_SliderHandle, slider).center()


def test_every_budget_across_a_24_gib_range_reaches_the_engine(qtbot, gpu_window):
    window = gpu_window
    slider = window.memory_panel.budget_slider
    widget = slider.slider
    widget.setFocus()
    event = replan(qtbot, window, lambda: qtbot.mouseClick(widget, Qt.MouseButton.LeftButton,
                                                           pos=handle_center(widget)))
    assert_landed(qtbot, window, event, int(GPU_FREE * 0.9) // MiB * MiB)  # clicking the handle asks again
    event = replan(qtbot, window, lambda: qtbot.keyClick(widget, Qt.Key.Key_End))
    assert_landed(qtbot, window, event, GPU_TOTAL)
    events = []
    record = events.append  # one bound method, so that disconnect finds what connect was given
    window.bridge.plan_changed.connect(record)
    def three_presses():  # as a user types: the event loop runs between the presses, within the debounce
        for _ in range(3):
            qtbot.keyClick(widget, Qt.Key.Key_PageDown)
            qtbot.wait(60)

    event = replan(qtbot, window, three_presses)
    assert_landed(qtbot, window, event, bytes_at(STEPS - 3 * widget.pageStep(), 256 * MiB, GPU_TOTAL))
    qtbot.wait(600)
    assert len(events) == 1, "after a mouse release, key presses still wait for the debounce: one re-plan"
    window.bridge.plan_changed.disconnect(record)
    left_of_handle = handle_center(widget) - QPoint(40, 0)
    event = replan(qtbot, window, lambda: qtbot.mouseClick(widget, Qt.MouseButton.LeftButton, pos=left_of_handle))
    assert_landed(qtbot, window, event, bytes_at(widget.value(), 256 * MiB, GPU_TOTAL))
    for typed, expected in (("6 GiB", 6 * GiB), ("6318718976", 6318718976), ("1.5", 3 * GiB // 2)):
        slider.size_edit.setText(typed)
        event = replan(qtbot, window, lambda: qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return))
        assert_landed(qtbot, window, event, expected)


@pytest.mark.slow  # every step of the slider, a 24 GiB GPU simulated
def test_sweeping_the_whole_range_lands_or_refuses_inline_at_each_step(qtbot, gpu_window):
    """Every twentieth of the scale, from 256 MiB to 24 GiB, as a drag leaves it: below the model's minimum
    the engine refuses (said inline, the slider goes back), from there on each budget is the engine's."""
    window = gpu_window
    slider = window.memory_panel.budget_slider
    widget, landed = slider.slider, []
    for position in range(0, STEPS + 1, widget.pageStep()):
        asked = bytes_at(position, 256 * MiB, GPU_TOTAL)
        event = replan(qtbot, window, lambda: widget.setValue(position))
        if event.error is None:
            assert event.new.budget_bytes == asked == slider.budget_bytes
            assert window.loader.engine.stats().plan.budget_bytes == asked
            landed.append(asked)
        else:
            assert "minimum is" in event.error and asked < GiB and slider.state_label.text().startswith("Refused")
            assert slider.budget_bytes == event.old.budget_bytes and not error_dialogs(window)
    assert len(landed) >= STEPS // widget.pageStep() - 6 and landed[-1] == GPU_TOTAL


def test_a_typed_size_outside_the_range_or_unreadable_is_said_inline(qtbot, gpu_window):
    slider = gpu_window.memory_panel.budget_slider
    for typed, said in (("48 GiB", "Type a size from"), ("lots", "is not a size")):
        slider.size_edit.setText(typed)
        qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return)
        assert said in slider.state_label.text()
    assert not gpu_window.budget.is_pending and not error_dialogs(gpu_window)


def test_no_signal_in_the_app_carries_a_32_bit_int():
    """Qt's `int` is 32 bits: bytes, tokens, counts and ids travel as `object` or 'qint64'."""
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Signal":
                assert not any(isinstance(arg, ast.Name) and arg.id == "int" for arg in node.args), path


def test_the_marks_name_the_models_minimum_and_all_resident_size_and_set_them(qtbot, gpu_window, tiny_model):
    from engine.api import EngineOptions, budget_marks

    window = gpu_window
    slider = window.memory_panel.budget_slider
    marks = budget_marks(EngineOptions(model=tiny_model, device="cpu", experts="paged"))
    qtbot.waitUntil(lambda: len(slider.marks.texts) == 2)
    assert slider.marks.texts == [f"minimum {window.memory_panel._format_bytes(marks.minimum)}",
                                  f"all resident {window.memory_panel._format_bytes(marks.all_resident)}"]
    event = replan(qtbot, window, lambda: slider.marks.click(0))
    assert_landed(qtbot, window, event, marks.minimum)
    assert event.new.min_layer_slots == window.loader.engine.info.top_k  # the least that loads: top_k slots
    event = replan(qtbot, window, lambda: slider.marks.click(1))
    assert_landed(qtbot, window, event, marks.all_resident)
    assert event.new.min_layer_slots == window.loader.engine.info.num_experts
