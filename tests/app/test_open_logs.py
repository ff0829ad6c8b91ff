"""Help → Open logs shows the log folder: in the desktop's file manager, or, where no launcher opens it, in a
dialog with the folder's path and a Copy button."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel

from app import main_window


def test_open_logs_without_a_launcher_shows_the_folder_with_copy(qtbot, start_app, monkeypatch):
    opened = []
    monkeypatch.setattr(main_window.QDesktopServices, "openUrl", lambda url: opened.append(url) or False)
    window = start_app(is_autoload=False, is_ready_awaited=False)
    window.window_actions.open_logs.trigger()
    assert opened and opened[0].toLocalFile() == str(window.paths.log_dir)
    dialog = window.log_folder_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    assert dialog.path_edit.text() == str(window.paths.log_dir)
    assert window.paths.log_file.name in dialog.findChild(QLabel).text()
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == str(window.paths.log_dir)


def test_open_logs_with_a_launcher_opens_the_folder_and_no_dialog(qtbot, start_app, monkeypatch):
    monkeypatch.setattr(main_window.QDesktopServices, "openUrl", lambda url: True)
    window = start_app(is_autoload=False, is_ready_awaited=False)
    window.window_actions.open_logs.trigger()
    assert window.log_folder_dialog is None
