"""Model → Draft tokens from the conversation: a checkable choice saved in the settings that makes the next requests
draft by prompt lookup (nothing reloads), and the memory panel's line on how many drafts the model accepted."""

from dataclasses import replace

from app.chat.conversation_store import Message
from app.memory.drafts_text import drafts_text


def test_the_choice_is_saved_and_the_next_request_drafts(start_app):
    window = start_app()
    action = window.window_actions.speculative
    model_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    assert action in model_menu.actions() and action.isCheckable() and not action.isChecked()
    engine = window.loader.engine
    history = [Message(role="user", content="def add(a, b):")]
    assert window.generation._chat_request(history).speculative == "off"
    action.trigger()
    assert window.settings.speculative and window._settings_store.load().speculative
    assert window.generation._chat_request(history).speculative == "ngram"
    assert window.loader.engine is engine  # a per-request choice: the model is not loaded again
    action.trigger()
    assert window.generation._chat_request(history).speculative == "off"


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
