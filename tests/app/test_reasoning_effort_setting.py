"""The reasoning effort in the app: a "Reasoning" choice beside the sampling controls, shown for a model whose
chat template takes one (gpt-oss), sent with chat requests, kept in the settings file across restarts."""

from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.engine_bridge import EngineBridge
from app.settings import SettingsStore
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle
from tests.engine.reasoning_fixtures import save_harmony_folder
from tests.scripted_engine import REASONING_REPLY, ScriptedEngine
from tests.tiny_models import write_tiny_model


def test_chat_requests_carry_the_chosen_effort(qtbot, tmp_path):
    engine, bridge = ScriptedEngine(REASONING_REPLY), EngineBridge()
    settings = GenerationSettings("chat", "", 0.0, 1.0, 8, reasoning_effort="high")
    controller = GenerationController(ConversationModel(ConversationStore(tmp_path / "c.sqlite")), bridge,
                                      lambda: engine, lambda: settings)
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        assert controller.send("Hi")
    assert engine.requests[-1].reasoning_effort == "high"


def test_the_choice_shows_for_a_harmony_model_and_survives_a_restart(qtbot, start_app, tmp_path, tiny_model):
    folder = write_tiny_model(tmp_path / "harmony", "qwen3_moe")
    save_harmony_folder(folder, vocab_size=300)
    window = start_app(model=str(folder))
    bar = window.chat.settings_bar
    assert bar.reasoning.isVisible() and bar.settings().reasoning_effort is None  # "Default" at first
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


def test_a_bad_effort_in_the_settings_file_falls_back_to_the_default(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"reasoning_effort": "extreme", "max_tokens": 64}')
    settings = SettingsStore(path).load()
    assert (settings.reasoning_effort, settings.max_tokens) == (None, 64)
