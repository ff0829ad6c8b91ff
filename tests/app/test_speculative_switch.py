"""Model → Draft tokens: Off, from the conversation (n-gram), from the model's draft layers (MTP; open only for a
model that has them) or Auto, kept in the settings. The choice goes with each request; the draft layers are
loaded for MTP and Auto, so a model that has them is loaded again when that changes. The memory panel's line says
how many drafts the model accepted."""

from dataclasses import replace

from app.chat.conversation_store import Message
from app.memory.drafts_text import drafts_text
from app.settings import SettingsStore
from app.window_actions import MTP_TIP, NO_MTP_TIP
from tests.app.conftest import LOAD_TIMEOUT_MS

HISTORY = [Message(role="user", content="def add(a, b):")]


def drafts_menu(window):
    model_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    return next(a.menu() for a in model_menu.actions() if a.text() == "&Draft tokens")


def test_the_choice_is_saved_and_goes_with_the_next_request(start_app):
    window = start_app()
    choices = window.window_actions.drafts
    assert drafts_menu(window).actions() == list(choices.values())
    assert choices["off"].isChecked() and all(action.isCheckable() for action in choices.values())
    assert window.generation._chat_request(HISTORY).speculative == "off"
    engine = window.loader.engine
    choices["ngram"].trigger()
    assert choices["ngram"].isChecked() and not choices["off"].isChecked()
    assert window._settings_store.load().speculative == "ngram"
    assert window.generation._chat_request(HISTORY).speculative == "ngram"
    choices["auto"].trigger()
    assert window.generation._chat_request(HISTORY).speculative == "auto"
    assert window.loader.engine is engine  # no draft layers to load: the model is not loaded again
    assert not choices["mtp"].isEnabled() and choices["mtp"].toolTip() == NO_MTP_TIP


def test_a_model_with_draft_layers_opens_mtp_and_loads_them(qtbot, start_app, monkeypatch):
    window = start_app()
    engine = window.loader.engine
    monkeypatch.setattr(type(engine), "has_draft_layers", property(lambda self: True), raising=False)
    window._show_draft_layers(engine)
    choices = window.window_actions.drafts
    assert choices["mtp"].isEnabled() and choices["mtp"].toolTip() == MTP_TIP
    assert window.loader.request.speculative == "off"
    choices["mtp"].trigger()  # the draft layers are loaded: the model is loaded again
    qtbot.waitUntil(lambda: window.loader.engine not in (None, engine), timeout=LOAD_TIMEOUT_MS)
    assert window.loader.request.speculative == "auto" and window.settings.speculative == "mtp"
    assert window.generation._chat_request(HISTORY).speculative == "auto"
    mtp_engine = window.loader.engine
    choices["auto"].trigger()  # draft layers stay loaded
    assert window.loader.engine is mtp_engine
    choices["ngram"].trigger()
    qtbot.waitUntil(lambda: window.loader.engine not in (None, mtp_engine), timeout=LOAD_TIMEOUT_MS)
    assert window.loader.request.speculative == "off"


def test_a_settings_file_with_the_old_switch_keeps_its_meaning(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"speculative": true}')
    assert SettingsStore(path).load().speculative == "ngram"
    path.write_text('{"speculative": false}')
    assert SettingsStore(path).load().speculative == "off"
    path.write_text('{"speculative": "sometimes"}')
    store = SettingsStore(path)
    assert store.load().speculative == "off" and "speculative" in store.problems[0]


def test_the_memory_panel_says_how_many_drafts_were_accepted(start_app):
    window = start_app()
    panel = window.memory_panel
    stats = window.loader.engine.stats()
    panel._show_plan(stats.plan, stats)
    assert not panel.drafts_label.isVisibleTo(panel)
    drafted = replace(stats, spec_proposed=200, spec_accepted=124, spec_verify_misses=37)
    panel._show_plan(drafted.plan, drafted)
    assert panel.drafts_label.isVisibleTo(panel)
    assert panel.drafts_label.text() == drafts_text(drafted)
    assert "62% accepted (124 of 200 tokens)" in drafts_text(drafted) and "37 expert misses" in drafts_text(drafted)
