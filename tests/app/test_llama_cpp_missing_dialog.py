"""Without llama-cpp-python, loading a GGUF file on llama.cpp shows the engine's refusal in the app's error dialog,
its text selectable, with a button that copies the pip command (imports of llama_cpp blocked, as on an install
without the `llama` extra)."""

import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QPushButton, QWidget

from app.error_dialog import COPY_BUTTON, show_error
from app.model_loader import user_message
from engine.api import Engine, EngineOptions, WispError
from engine.gguf.backend_choice import llama_cpp_install_command
from engine.gguf.convert import convert
from engine.loading.model_path import DEMO_MODEL


def test_the_load_error_dialog_copies_the_pip_command(qtbot, tmp_path, monkeypatch):
    path = convert(DEMO_MODEL, tmp_path / "demo-f32.gguf", "f32").path
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` raises ImportError
    with pytest.raises(WispError) as refused:
        Engine(EngineOptions(model=str(path), device="cpu", backend="llama.cpp"))
    parent = QWidget()
    qtbot.addWidget(parent)
    box = show_error(parent, "Could not load the model", user_message(refused.value))
    assert "llama-cpp-python is not installed" in box.text() and llama_cpp_install_command() in box.text()
    assert box.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    box.findChild(QPushButton, COPY_BUTTON).click()
    assert QGuiApplication.clipboard().text() == llama_cpp_install_command()


def test_other_errors_have_no_copy_button(qtbot):
    parent = QWidget()
    qtbot.addWidget(parent)
    box = show_error(parent, "Could not load the model", "the budget is too small: at least 2.0 GiB")
    assert box.findChild(QPushButton, COPY_BUTTON) is None
