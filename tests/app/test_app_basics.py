"""Boundaries, settings, rendering, theme, accessibility and logs."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from PySide6.QtWidgets import (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox,
                               QPlainTextEdit)

from app.chat.markdown_render import RenderStyle, code_blocks, render_markdown
from app.model_loader import LoadRequest
from app.settings import AppSettings, SettingsStore
from tests.app.conftest import LOAD_TIMEOUT_MS

ROOT = Path(__file__).resolve().parents[2]
STYLE = RenderStyle("default", "#f6f8fa", "#eeeeee", "#888888", "#0969da")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            names |= {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
    return names


def test_the_app_uses_only_engine_api_and_the_engine_never_imports_qt():
    for path in (ROOT / "app").rglob("*.py"):
        engine_imports = {name for name in imported_modules(path) if name.split(".")[0] == "engine"}
        assert engine_imports <= {"engine.api"}, path
    for path in (ROOT / "engine").rglob("*.py"):
        assert not {name for name in imported_modules(path) if "Qt" in name or "PySide" in name}, path


def test_the_window_modules_import_without_torch_so_the_window_opens_fast():
    code = "import sys, app.main, app.main_window; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_settings_round_trip_and_survive_a_bad_file(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    settings = AppSettings(budget_bytes=123, model_folders=("/models",), theme="dark", last_model="/m", mode="code")
    store.save(settings)
    assert store.load() == settings
    (tmp_path / "settings.json").write_text(json.dumps({"theme": "purple", "unknown": 1, "max_tokens": 64,
                                                        "repeatable": "no", "gguf_engine": "vulkan"}))
    assert store.load() == AppSettings(max_tokens=64)
    (tmp_path / "settings.json").write_text("{broken")
    assert store.load() == AppSettings()


def test_markdown_highlights_code_and_escapes_html():
    text = "Use **bold** <b>not html</b>\n\n```python\ndef f(x):\n    return x < 2\n```\n\n```js\nlet unfinished ="
    html = render_markdown(text, STYLE)
    assert "<b>bold</b>" in html and "&lt;b&gt;not html&lt;/b&gt;" in html
    assert 'style="color:' in html and "wisp-code:copy/0" in html and "wisp-code:save/1" in html
    assert [block.language for block in code_blocks(text)] == ["python", "js"]
    assert code_blocks(text)[1].code == "let unfinished ="  # a reply still streaming


def test_theme_switch_persists_and_restyles(qtbot, start_app):
    window = start_app()
    window.set_theme("dark")
    assert window.theme.name == "dark" and window.settings.theme == "dark"
    assert f"background: {window.theme.window}" in QApplication.instance().styleSheet()
    assert window.window_actions.theme_dark.isChecked()


def test_controls_have_accessible_names_and_the_log_is_written(qtbot, start_app):
    window = start_app()
    kinds = (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox, QPlainTextEdit)
    unnamed = [widget for kind in kinds for widget in window.findChildren(kind)
               if widget.isVisibleTo(window) and not (widget.accessibleName() or getattr(widget, "text", str)())]
    assert not unnamed
    assert "loaded" in window.paths.log_file.read_text()


def test_repeatable_outputs_toggle_persists_and_reloads_the_model(qtbot, start_app):
    window = start_app()
    action = window.window_actions.repeatable
    assert action.isCheckable() and action.isChecked() and window.loader.request.deterministic
    first_engine = window.loader.engine
    action.trigger()  # off: faster kernels, the model is loaded again with them
    assert window.settings.repeatable is False and not action.isChecked()
    qtbot.waitUntil(lambda: window.loader.engine is not None and window.loader.engine is not first_engine,
                    timeout=LOAD_TIMEOUT_MS)
    assert window.loader.request.deterministic is False
    assert window.loader.engine.options.deterministic is False
    assert window._settings_store.load().repeatable is False


def test_the_gguf_engine_choice_is_a_model_submenu_saved_and_leaves_a_checkpoint_loaded(qtbot, start_app, tiny_model):
    window = start_app()
    engine, actions = window.loader.engine, window.window_actions.gguf_engines
    model_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    submenu = next(a.menu() for a in model_menu.actions() if a.text() == "&GGUF engine")
    assert submenu.actions() == list(actions.values()) and actions["auto"].isChecked()
    actions["llama.cpp"].trigger()
    assert actions["llama.cpp"].isChecked() and not actions["auto"].isChecked()
    assert window._settings_store.load().gguf_engine == "llama.cpp"
    qtbot.wait(100)
    assert window.loader.engine is engine and not window.loader.is_loading  # only a loaded GGUF file reloads
    # The engine refuses llama.cpp for a checkpoint folder: the choice applies to .gguf files alone.
    assert LoadRequest(tiny_model, None, gguf_engine="llama.cpp").options().backend == "auto"
    assert LoadRequest("/m/x.GGUF", None, gguf_engine="llama.cpp").options().backend == "llama.cpp"
