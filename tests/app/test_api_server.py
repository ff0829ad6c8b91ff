"""The "serve this model" toggle: the loaded model answers on loopback at the URL shown, the toggle stops it,
a model change restarts it on the same port with the new model, quitting stops it, and a busy port is a
readable error."""

import json
import socket
import urllib.error
import urllib.request

import pytest
from PySide6.QtGui import QGuiApplication

from tests.app.driving import error_dialogs, wait_for_error_dialog

SERVER_TIMEOUT_MS = 10_000
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, whatever the proxy settings


def served_model_ids(url: str) -> list[str]:
    with DIRECT.open(url + "/models", timeout=10) as response:
        return [card["id"] for card in json.load(response)["data"]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_toggle_serves_the_loaded_model_and_stops(qtbot, start_app):
    window = start_app()
    panel = window.server_panel
    panel.port_spin.setValue(0)  # any free port
    with qtbot.waitSignal(window.server.started, timeout=SERVER_TIMEOUT_MS) as started:
        panel.toggle.click()
    url = started.args[0]
    assert url.startswith("http://127.0.0.1:") and panel.url_field.text() == url
    assert served_model_ids(url) == [window.loader.engine.info.name]
    panel.copy_button.click()
    assert QGuiApplication.clipboard().text() == url
    with qtbot.waitSignal(window.server.stopped, timeout=SERVER_TIMEOUT_MS):
        panel.toggle.click()
    assert not panel.toggle.isChecked() and panel.url_field.text() == "" and not panel.copy_button.isEnabled()
    with pytest.raises(urllib.error.URLError):
        served_model_ids(url)
    assert not error_dialogs(window)


def test_a_model_change_restarts_the_server_and_quitting_stops_it(qtbot, start_app, tiny_model):
    window = start_app()
    panel = window.server_panel
    panel.port_spin.setValue(free_port())
    with qtbot.waitSignal(window.server.started, timeout=SERVER_TIMEOUT_MS) as started:
        panel.toggle.click()
    url, old_engine = started.args[0], window.loader.engine
    assert window.settings.server_port == panel.port
    with qtbot.waitSignals([window.server.stopped, window.server.started], order="strict", timeout=30_000):
        window.load_model(tiny_model)
    assert window.loader.engine is not old_engine
    assert panel.toggle.isChecked() and panel.url_field.text() == url
    assert served_model_ids(url) == [window.loader.engine.info.name]
    window.close()
    with pytest.raises(urllib.error.URLError):
        served_model_ids(url)


def test_a_busy_port_gives_a_readable_error_and_the_app_keeps_working(qtbot, start_app):
    window = start_app()
    panel = window.server_panel
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        panel.port_spin.setValue(busy.getsockname()[1])
        with qtbot.waitSignal(window.server.failed, timeout=SERVER_TIMEOUT_MS):
            panel.toggle.click()
        dialog = wait_for_error_dialog(qtbot, window)
    assert f"127.0.0.1:{panel.port}" in dialog.text() and "in use" in dialog.text()
    assert not panel.toggle.isChecked() and panel.toggle.isEnabled() and panel.port_spin.isEnabled()
    dialog.accept()
    panel.port_spin.setValue(0)
    with qtbot.waitSignal(window.server.started, timeout=SERVER_TIMEOUT_MS) as started:
        panel.toggle.click()
    assert served_model_ids(started.args[0]) == [window.loader.engine.info.name]
