"""The first run: the welcome dialog shows the hardware, the models found, a recommended budget and plan and the
privacy statement; it opens over the main window once per user."""

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.app_paths import AppPaths
from app.engine_api import format_bytes
from app.first_run import welcome_dialog
from app.first_run.welcome_dialog import WelcomeDialog
from app.launch_options import LaunchOptions
from app.main import open_main_window
from app.picker.model_fit import LLAMA_CPP_FIT
from app.picker.model_picker_dialog import ModelPickerDialog
from app.theme import load_theme

FACTS_TIMEOUT_MS = 30_000


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def form_texts(form) -> dict[str, str]:
    rows = {}
    for row in range(form.rowCount()):
        label = form.itemAt(row, form.ItemRole.LabelRole)
        field = form.itemAt(row, form.ItemRole.FieldRole)
        rows[label.widget().text() if label else ""] = field.widget().text()
    return rows


def make_dialog(qtbot, data_dir, folders=(), gguf_engine="auto") -> WelcomeDialog:
    dialog = WelcomeDialog(AppPaths.resolve(data_dir).create(), load_theme("light"), folders,
                           gguf_engine=gguf_engine)
    qtbot.addWidget(dialog)
    return dialog


def test_it_shows_the_hardware_models_a_recommended_plan_and_that_nothing_leaves_the_machine(qtbot, data_dir,
                                                                                            tiny_model):
    dialog = make_dialog(qtbot, data_dir, (tiny_model,))
    with qtbot.waitSignal(dialog.facts_shown, timeout=FACTS_TIMEOUT_MS) as shown:
        dialog.show()
    facts = shown.args[0]
    hardware = form_texts(dialog.hardware_form)
    assert set(hardware) == {"GPU", "Memory", "Software"}
    assert f"{facts.hardware.cpu_count} CPU cores" in hardware["Memory"]
    assert facts.hardware.torch_version in hardware["Software"]
    assert ("VRAM" in hardware["GPU"]) == facts.hardware.has_cuda
    names = [dialog.models.index(row, 0).data() for row in range(dialog.models.rowCount())]
    assert names == ["Wisp demo (qwen3_moe)", Path(tiny_model).name]
    assert dialog.budget_label.text().startswith(format_bytes(facts.budget.default))
    assert tiny_model in dialog.model_label.text()  # the user's own model is recommended over the demo
    assert "expert slots" in dialog.plan_label.text() and "KV" in dialog.plan_label.text()
    assert "Nothing leaves this computer" in dialog.privacy_label.text()
    assert "no telemetry" in dialog.privacy_label.text()
    assert str(data_dir) in dialog.folders_label.text()
    assert dialog.load_button.isVisible()
    with qtbot.waitSignal(dialog.model_chosen) as chosen:
        qtbot.mouseClick(dialog.load_button, Qt.MouseButton.LeftButton)
    assert chosen.args == [tiny_model] and not dialog.isVisible()


@pytest.mark.parametrize("gguf_engine", ["auto", "llama.cpp"])
def test_a_gguf_file_gets_the_plan_of_the_engine_that_would_run_it(qtbot, data_dir, gguf_model, gguf_engine):
    dialog = make_dialog(qtbot, data_dir, (gguf_model,), gguf_engine)
    with qtbot.waitSignal(dialog.facts_shown, timeout=FACTS_TIMEOUT_MS) as shown:
        dialog.show()
    recommendation = shown.args[0].recommendation
    assert recommendation.row.entry.path == gguf_model and gguf_model in dialog.model_label.text()
    if gguf_engine == "auto":  # Wisp's engine runs the file: its plan, experts in slots
        assert recommendation.row.fit.startswith(("fits", "pages experts"))
        assert "expert slots" in dialog.plan_label.text() and "KV" in dialog.plan_label.text()
    else:
        assert dialog.plan_label.text() == recommendation.row.fit == LLAMA_CPP_FIT


def test_a_failed_detection_is_shown_and_the_rest_stays(qtbot, data_dir, monkeypatch):
    def fail(folders, gguf_engine):
        raise RuntimeError("no torch here")

    monkeypatch.setattr(welcome_dialog, "gather_facts", fail)
    dialog = make_dialog(qtbot, data_dir)
    dialog.show()
    qtbot.waitUntil(lambda: "no torch here" in str(form_texts(dialog.hardware_form)), timeout=FACTS_TIMEOUT_MS)
    assert dialog.privacy_label.isVisible() and dialog.start_button.isEnabled()


def test_it_opens_over_the_main_window_on_the_first_run_only(qtbot, data_dir):
    options = LaunchOptions(data_dir=str(data_dir), device="cpu", theme="light", is_autoload=False)
    paths = AppPaths.resolve(options.data_dir).create()
    window = open_main_window(options, paths)
    qtbot.addWidget(window)
    dialog = window.findChild(WelcomeDialog)
    assert dialog.isVisible() and dialog.windowModality() == Qt.WindowModality.WindowModal
    qtbot.mouseClick(dialog.choose_button, Qt.MouseButton.LeftButton)  # before detection has finished
    qtbot.waitUntil(lambda: window.findChild(ModelPickerDialog) is not None)
    assert window.findChild(ModelPickerDialog).isVisible() and not dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.facts is not None, timeout=FACTS_TIMEOUT_MS)  # a closed dialog still takes them
    assert dialog.model_label.text() == "Wisp demo (qwen3_moe)" and dialog.load_button.isHidden()
    window.close()

    again = open_main_window(options, paths)
    qtbot.addWidget(again)
    assert again.isVisible() and again.findChild(WelcomeDialog) is None


def test_nothing_overlaps_and_return_starts(qtbot, data_dir, tiny_model):
    dialog = make_dialog(qtbot, data_dir, (tiny_model,))
    with qtbot.waitSignal(dialog.facts_shown, timeout=FACTS_TIMEOUT_MS):
        dialog.show()
    qtbot.wait(50)
    table, hint = dialog.models_table, dialog.models_hint
    table_bottom = table.mapTo(dialog, table.rect().bottomLeft()).y()
    assert table_bottom < hint.mapTo(dialog, hint.rect().topLeft()).y(), "the models table covers the text below"
    assert hint.height() >= hint.heightForWidth(hint.width())  # not squeezed
    with qtbot.assertNotEmitted(dialog.choose_model_requested):
        qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.result() == dialog.DialogCode.Accepted and not dialog.isVisible()
