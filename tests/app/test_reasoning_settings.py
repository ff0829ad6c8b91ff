"""Reasoning options in the app, beside the sampling controls: a "Reasoning" effort choice for a model whose chat
template takes one (gpt-oss) and a "Think" switch for one whose template switches thinking (Qwen3). Each shows for
such models only, goes with chat requests, and is kept in the settings file across restarts."""

from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.engine_bridge import EngineBridge
from app.settings import SettingsStore
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle
from tests.generation.reasoning_fixtures import write_reasoning_model
from tests.scripted_engine import REASONING_REPLY, ScriptedEngine


def test_chat_requests_carry_the_chosen_options(qtbot, tmp_path):
    engine, bridge = ScriptedEngine(REASONING_REPLY), EngineBridge()
    settings = GenerationSettings("chat", "", 0.0, 1.0, 8, reasoning_effort="high", enable_thinking=False)
    controller = GenerationController(ConversationModel(ConversationStore(tmp_path / "c.sqlite")), bridge,
                                      lambda: engine, lambda: settings)
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        assert controller.send("Hi")
    assert (engine.requests[-1].reasoning_effort, engine.requests[-1].enable_thinking) == ("high", False)


def test_the_choice_shows_for_a_harmony_model_and_survives_a_restart(qtbot, start_app, tmp_path, tiny_model):
    folder = write_reasoning_model(tmp_path / "harmony", "harmony")
    window = start_app(model=str(folder))
    bar = window.chat.settings_bar
    assert bar.reasoning.isVisible() and bar.settings().reasoning_effort is None  # "Default" at first
    assert not bar.thinking.isVisible()
    bar.reasoning.setCurrentIndex(bar.reasoning.findText("High"))
    assert bar.settings().reasoning_effort == "high"
    assert SettingsStore(window.paths.settings_file).load().reasoning_effort == "high"  # saved at once
    use_greedy_sampling(window, max_tokens=4)
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        type_and_send(qtbot, window, "Hi")
    assert finished.args[0].reason in ("length", "stop")
    wait_until_idle(qtbot, window)
    window.close()

    plain = start_app(model=tiny_model)  # its template takes no effort: hidden, not sent, still remembered
    bar = plain.chat.settings_bar
    assert not bar.reasoning.isVisible() and bar.settings().reasoning_effort is None
    assert bar.chosen_reasoning_effort() == "high"


def test_bad_reasoning_options_in_the_settings_file_fall_back_to_the_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"reasoning_effort": "extreme", "thinking": "no", "max_tokens": 64}')
    settings = SettingsStore(path).load()
    assert (settings.reasoning_effort, settings.thinking, settings.max_tokens) == (None, True, 64)


def test_the_think_switch_shows_for_a_qwen3_style_model_and_turns_thinking_off(qtbot, start_app, tmp_path):
    folder = write_reasoning_model(tmp_path / "think", "think")
    window = start_app(model=str(folder))
    bar = window.chat.settings_bar
    assert bar.thinking.isVisible() and bar.thinking.isChecked() and not bar.reasoning.isVisible()
    assert bar.settings().enable_thinking is None  # on: the template's default
    bar.thinking.setChecked(False)
    assert bar.settings().enable_thinking is False
    assert SettingsStore(window.paths.settings_file).load().thinking is False
    sent = []
    submit = window.loader.engine.submit
    window.loader.engine.submit = lambda request, *args: sent.append(request) or submit(request, *args)
    use_greedy_sampling(window, max_tokens=4)
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000):
        type_and_send(qtbot, window, "Hi")
    wait_until_idle(qtbot, window)
    assert sent[-1].enable_thinking is False
