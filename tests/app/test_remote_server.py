"""A remote OpenAI-compatible server chosen like a model: added in the picker with its key (kept in the settings),
loaded, chatted with (streamed), shown as memory the remote server manages, and loaded again after a restart.
A dead URL is a dialog, and the model that was serving keeps serving."""

import socket

import pytest

from app.memory.budget_slider_widget import REMOTE_TEXT
from app.picker.remote_server_dialog import RemoteServerDialog
from app.remote_server import RemoteServer
from engine.api import Engine, EngineOptions, start_server
from tests.app.driving import error_dialogs, type_and_send, use_greedy_sampling, wait_for_error_dialog, wait_until_idle

API_KEY = "remote-test-key"
LOAD_TIMEOUT_MS = 30_000


@pytest.fixture
def remote_url(tiny_model):
    """A real Wisp server with a key, on loopback, serving the tiny model from its own engine."""
    engine = Engine(EngineOptions(model=tiny_model, device="cpu"))
    handle = start_server(engine, "127.0.0.1", 0, api_key=API_KEY)
    yield handle.url
    handle.stop()
    engine.close()


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"  # nothing listens once the probe closes


def add_and_load(qtbot, window, server: RemoteServer, is_typed: bool = False) -> None:
    """Add the server in the model picker (typed into its dialog, or through the same call) and load it."""
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        if is_typed:
            type_into_dialog(qtbot, picker, server)
        else:
            picker.add_remote_server(server)
    paths = [row.entry.path for row in picker.model.rows]
    picker.select_row(paths.index(server.url))
    assert picker.load_button.isEnabled()
    picker.load_button.click()


def type_into_dialog(qtbot, picker, server: RemoteServer) -> None:
    picker.add_server_button.click()
    dialog = picker.findChild(RemoteServerDialog)
    qtbot.keyClicks(dialog.url_field, "gpu-box:8000")
    assert not dialog.ok_button.isEnabled()  # no scheme: not a server URL yet
    dialog.url_field.setText(server.url)
    dialog.key_field.setText(server.api_key or "")
    dialog.ok_button.click()


def test_a_remote_server_is_chosen_like_a_model_and_streams_replies(qtbot, start_app, remote_url, data_dir):
    window = start_app()
    with qtbot.waitSignal(window.loader.ready, timeout=LOAD_TIMEOUT_MS):
        add_and_load(qtbot, window, RemoteServer(remote_url, API_KEY))
    engine = window.loader.engine
    assert engine.info.model_type == "remote" and engine.options.api_key == API_KEY
    assert window.settings.remote_servers == (RemoteServer(remote_url, API_KEY),)
    assert window.settings.last_model == remote_url
    slider, panel = window.memory_panel.budget_slider, window.memory_panel
    assert not slider.slider.isEnabled() and slider.state_label.text() == REMOTE_TEXT
    assert "managed by the remote server" in panel.plan_label.text() and panel.bar.segments == []
    assert "remote" in window.status.model_label.text() and "0 experts" not in window.status.model_label.text()

    use_greedy_sampling(window, max_tokens=12)
    batches = []
    window.bridge.text_arrived.connect(lambda request_id, text: batches.append(text))
    with qtbot.waitSignal(window.bridge.finished, timeout=LOAD_TIMEOUT_MS) as finished:
        type_and_send(qtbot, window, "hello over the network")
    wait_until_idle(qtbot, window)
    reply = window.conversation.messages[-1]
    assert finished.args[0].reason in ("stop", "length") and reply.content == finished.args[0].text
    assert batches and "".join(batches) == reply.content[: len("".join(batches))]
    window.close()

    again = start_app(model=None)  # the last model: the remote server, with its stored key
    assert again.loader.engine.info.model_type == "remote" and again.loader.request.model == remote_url
    assert not error_dialogs(again)


def test_a_dead_remote_url_is_a_dialog_and_the_current_model_keeps_serving(qtbot, start_app):
    window = start_app()
    engine = window.loader.engine
    url = dead_url()
    add_and_load(qtbot, window, RemoteServer(url), is_typed=True)
    dialog = wait_for_error_dialog(qtbot, window)
    assert url in dialog.text() and window.settings.remote_servers == (RemoteServer(url),)
    qtbot.waitUntil(lambda: window.loader.engine is engine)
    assert window.memory_panel.budget_slider.slider.isEnabled()
    dialog.accept()
    use_greedy_sampling(window, max_tokens=8)
    type_and_send(qtbot, window, "still here?")
    wait_until_idle(qtbot, window)
    assert window.conversation.messages[-1].info["reason"] in ("stop", "length")
