"""The app's sampling settings beyond temperature and top-p, and the "JSON output" switch with its schema box: they
go with each request, a reply under a schema is JSON, they survive a restart, and a bad schema is said, not sent."""

import json

from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.chat.sampling_extras import SamplingExtras
from app.engine_bridge import EngineBridge
from app.settings import SettingsStore
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle
from tests.scripted_engine import ScriptedEngine

SCHEMA = '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}'


def controller_for(engine, tmp_path, extras: SamplingExtras) -> tuple[GenerationController, EngineBridge]:
    settings = GenerationSettings("chat", "", 0.0, 1.0, 8, extras=extras)
    bridge = EngineBridge()
    model = ConversationModel(ConversationStore(tmp_path / "c.sqlite"))
    return GenerationController(model, bridge, lambda: engine, lambda: settings), bridge


def test_requests_carry_the_extra_sampling_values_and_the_schema(qtbot, tmp_path):
    engine = ScriptedEngine([("{}", "")])
    extras = SamplingExtras(top_k=40, min_p=0.05, repetition_penalty=1.1, presence_penalty=0.5,
                            frequency_penalty=0.25, json_output=True, json_schema=SCHEMA)
    controller, bridge = controller_for(engine, tmp_path, extras)
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        assert controller.send("Hi")
    sampling = engine.requests[-1].sampling
    assert (sampling.top_k, sampling.min_p, sampling.repetition_penalty) == (40, 0.05, 1.1)
    assert (sampling.presence_penalty, sampling.frequency_penalty, sampling.json_schema) == (0.5, 0.25, SCHEMA)


def test_a_schema_that_is_not_json_is_said_and_nothing_is_sent(qtbot, tmp_path):
    engine = ScriptedEngine([("x", "")])
    controller, _ = controller_for(engine, tmp_path, SamplingExtras(json_output=True, json_schema="{not json"))
    with qtbot.waitSignal(controller.failed, timeout=5_000) as failed:
        assert not controller.send("Hi")
    assert "not valid JSON" in failed.args[0] and not engine.requests


def test_json_output_in_the_window_replies_in_json_and_is_remembered(qtbot, start_app):
    window = start_app()
    bar = window.chat.settings_bar
    bar.more_toggle.setChecked(True)
    assert bar.extras.isVisible() and not bar.extras.schema_edit.isVisible()
    bar.extras.json_output.setChecked(True)
    assert bar.extras.schema_edit.isVisible()
    bar.extras.schema_edit.setPlainText(SCHEMA)
    bar.extras.top_k.setValue(7)
    use_greedy_sampling(window, max_tokens=40)
    with qtbot.waitSignal(window.bridge.finished, timeout=60_000) as finished:
        type_and_send(qtbot, window, "A number?")
    assert 0 <= json.loads(finished.args[0].text)["n"] <= 9
    wait_until_idle(qtbot, window)
    saved = SettingsStore(window.paths.settings_file).load().sampling_extras
    assert (saved.json_output, saved.json_schema, saved.top_k) == (True, SCHEMA, 7)


def test_bad_extras_in_the_settings_file_fall_back_to_the_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"sampling_extras": {"top_k": -3, "min_p": "x", "json_output": 1,
                                                    "repetition_penalty": 1.2, "json_schema": 5}}))
    extras = SettingsStore(path).load().sampling_extras
    assert extras == SamplingExtras(repetition_penalty=1.2)
