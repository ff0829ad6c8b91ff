"""Model > Host memory for experts…: the host-RAM cap (`--host-budget`) chosen in the app, saved in the settings
and applied by loading the model again; Cancel and an unchanged value leave the model alone."""

from PySide6.QtWidgets import QDialogButtonBox

from app.settings import SettingsStore

GiB = 1024**3


def press(dialog, button) -> None:
    dialog.findChild(QDialogButtonBox).button(button).click()


def test_a_cap_is_saved_and_reloads_the_model(qtbot, start_app):
    window = start_app()
    qtbot.waitUntil(lambda: window._host_total_bytes is not None, timeout=10_000)
    first = window.loader.engine
    window.window_actions.host_memory.trigger()
    dialog = window._host_budget_dialog
    assert dialog.isVisible() and dialog.automatic.isChecked() and not dialog.size.isEnabled()
    assert dialog.size.maximum() * GiB <= window._host_total_bytes + GiB
    dialog.limited.setChecked(True)
    dialog.size.setValue(16.0)  # 2**34 bytes: past what a 32-bit signal would carry
    press(dialog, QDialogButtonBox.StandardButton.Ok)
    assert SettingsStore(window.paths.settings_file).load().host_budget_bytes == 16 * GiB
    qtbot.waitUntil(lambda: window.loader.engine is not None and window.loader.engine is not first, timeout=30_000)
    assert window.loader.request.host_budget_bytes == 16 * GiB

    second = window.loader.engine
    dialog = window.open_host_budget_dialog()
    assert dialog.limited.isChecked() and dialog.size.value() == 16.0
    press(dialog, QDialogButtonBox.StandardButton.Cancel)
    dialog = window.open_host_budget_dialog()
    press(dialog, QDialogButtonBox.StandardButton.Ok)  # unchanged: no reload
    assert window.loader.engine is second and window.settings.host_budget_bytes == 16 * GiB

    dialog = window.open_host_budget_dialog()
    dialog.automatic.setChecked(True)
    press(dialog, QDialogButtonBox.StandardButton.Ok)
    assert SettingsStore(window.paths.settings_file).load().host_budget_bytes is None
    qtbot.waitUntil(lambda: window.loader.engine is not None and window.loader.engine is not second, timeout=30_000)
    assert window.loader.request.host_budget_bytes is None
