"""A long session in the real window: 200 turns with budget changes, model switches (checkpoint -> GGUF on Wisp's
engine -> the same GGUF on llama.cpp -> ...) and stops in between. After every step the memory panel and the status
bar are checked against the engine's own stats: the plan and budget in words, the bar's legend, the decode chart,
the MV-WSA curve's current split, the context count and what each turn's prompt sent."""

import re

import pytest
from PySide6.QtCore import Qt

from app.engine_api import format_bytes
from app.memory.budget_slider_widget import NOT_APPLICABLE_TEXT
from app.memory.memory_segments import expert_share, memory_segments
from engine.api import EngineOptions, GenerateRequest, budget_marks
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle

NUM_TURNS = 200
SWITCH_EVERY, BUDGET_EVERY, STOP_EVERY, NEW_CHAT_EVERY = 25, 7, 10, 50
SYSTEM = "Answer in a few words."
MiB = 1024**2


def marks_of(model: str):
    return budget_marks(EngineOptions(model=model, device="cpu", experts="paged"))


def switch_to(qtbot, window, model: str, gguf_engine: str, budget: int) -> None:
    """Model → GGUF engine for a GGUF file (it reloads one that serves), then the picker's "Load at" path."""
    if model.endswith(".gguf"):
        window.window_actions.gguf_engines[gguf_engine].trigger()
    if window.loader.request.model != model:
        window.load_model_at(model, budget)
    qtbot.waitUntil(lambda: not window.loader.is_loading and window.loader.engine is not None
                    and window.loader.request.model == model
                    and (not model.endswith(".gguf") or window.loader.request.gguf_engine == gguf_engine),
                    timeout=60_000)


def change_budget(qtbot, window, num_bytes: int) -> None:
    slider = window.memory_panel.budget_slider
    slider.size_edit.setText(f"{num_bytes / MiB:.1f} MiB")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000):
        qtbot.keyClick(slider.size_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.budget.is_pending, timeout=10_000)


def take_turn(qtbot, window, text: str, is_stopped: bool):
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        type_and_send(qtbot, window, text)
        if is_stopped:  # Esc once the reply shows text (a reply that ends first is not stopped)
            qtbot.waitUntil(lambda: bool(window.conversation.messages[-1].content) or not window.generation.is_busy,
                            timeout=30_000)
            qtbot.keyClick(window, Qt.Key.Key_Escape)
    wait_until_idle(qtbot, window)
    return finished.args[0]


def sent_tokens(window, reply_index: int) -> int:
    """The engine's count of what a reply's prompt held: the system prompt and the messages not left out."""
    messages = window.conversation.messages
    start, end = messages[reply_index].info.get("dropped", (0, 0))
    kept = [m for i, m in enumerate(messages[:reply_index]) if not start <= i < end and not m.is_empty_failure]
    chat = [{"role": "system", "content": SYSTEM}] + [{"role": m.role, "content": m.content} for m in kept]
    return window.loader.engine.count_prompt_tokens(GenerateRequest(messages=tuple(chat)))


def check_numbers(window) -> None:
    """The panel and the status bar say what the engine's stats say (after a poll, as the panel's timer does)."""
    engine, panel = window.loader.engine, window.memory_panel
    panel._on_poll_timer_timeout()
    stats = engine.stats()
    plan = stats.plan
    assert panel.decode_chart.values[-1] == stats.decode_tok_s == 0.0  # idle after every step, Stop included
    assert f"KV {format_bytes(plan.kv_bytes)}" in panel.plan_label.text()
    for segment in memory_segments(plan, stats):
        assert panel.legend_text(segment.key).endswith(f"{segment.label} {format_bytes(segment.num_bytes)}")
    used, maximum = re.match(r"Context ([\d,]+) / ([\d,]+) tokens", window.status.context_label.text()).groups()
    assert int(maximum.replace(",", "")) == engine.info.max_model_len > int(used.replace(",", ""))
    assert engine.info.name in window.status.model_label.text()
    if plan.mode == "llama.cpp":
        assert window.memory_panel.budget_slider.state_label.text() == NOT_APPLICABLE_TEXT
        return
    assert f"budget {format_bytes(plan.budget_bytes)}" in panel.plan_label.text()
    assert panel.budget_slider.budget_bytes == plan.budget_bytes
    panel.refresh()
    if panel.curve.is_available:
        share = expert_share(plan)
        xs = [x for x, _ in panel.curve._points]
        assert panel.curve._current == share and min(xs) - 1e-6 <= share <= max(xs) + 1e-6


@pytest.mark.slow
def test_two_hundred_turns_with_budgets_switches_and_stops_keep_every_number_true(qtbot, start_app, tiny_model,
                                                                                  gguf_model, app_gguf_files):
    # llama.cpp runs the f32 file: this machine's llama-cpp-python build crashes decoding the tiny Q8_0 file
    f32_model = str(app_gguf_files.converted("qwen3_moe", "f32"))
    models = [(tiny_model, "auto"), (gguf_model, "wisp"), (f32_model, "llama.cpp")]
    budgets = {model: (m.minimum + (m.all_resident - m.minimum) // 4, m.minimum + (m.all_resident - m.minimum) // 2)
               for model, m in ((tiny_model, marks_of(tiny_model)), (gguf_model, marks_of(gguf_model)))}
    budgets[f32_model] = budgets[tiny_model]  # not used by llama.cpp
    window = start_app()
    use_greedy_sampling(window, max_tokens=6, system_prompt=SYSTEM)
    num_stops = num_switches = num_budgets = num_dropped = 0
    for turn in range(NUM_TURNS):
        if turn and turn % SWITCH_EVERY == 0:
            num_switches += 1
        model, gguf_engine = models[num_switches % len(models)]
        if turn and turn % SWITCH_EVERY == 0:
            switch_to(qtbot, window, model, gguf_engine, budgets[model][0])
            check_numbers(window)
        if turn % BUDGET_EVERY == 0 and gguf_engine != "llama.cpp":
            num_budgets += 1
            change_budget(qtbot, window, budgets[model][num_budgets % 2])
            check_numbers(window)
        if turn and turn % NEW_CHAT_EVERY == 0:
            window.new_chat()
        is_stopped = turn % STOP_EVERY == STOP_EVERY - 1
        use_greedy_sampling(window, max_tokens=200 if is_stopped else 6)
        event = take_turn(qtbot, window, f"turn {turn}: say something about the number {turn}", is_stopped)
        assert event.reason in (("cancelled", "stop", "length") if is_stopped else ("stop", "length")), event.error
        num_stops += event.reason == "cancelled"
        reply = window.conversation.messages[-1]
        assert reply.info["reason"] == event.reason and reply.info["prompt_tokens"] == event.stats.prompt_tokens
        assert event.stats.prompt_tokens == sent_tokens(window, len(window.conversation.messages) - 1)
        num_dropped += "dropped" in reply.info
        check_numbers(window)
    assert num_switches == (NUM_TURNS - 1) // SWITCH_EVERY and num_stops >= NUM_TURNS // STOP_EVERY // 2
    assert num_dropped > 0  # the chats outgrew the 512-token context and kept going
