"""A GGUF file made by llama.cpp's quantizer, in the app: on Wisp's engine it pages its quantized experts within
the budget with the memory panel live, the slider marked and the picker agreeing; Model → GGUF engine → llama.cpp
loads it again on llama.cpp, where the pager's charts and the budget do not apply."""

from app.memory.budget_slider_widget import NOT_APPLICABLE_TEXT
from app.memory.memory_segments import memory_segments
from app.memory.plan_text import slots_text
import pytest

from app.model_loader import LoadRequest, _RefusedBeforeUnload, budget_marks, check_before_unload
from app.picker.model_fit import LLAMA_CPP_FIT, fit_at_budget
from tests.app.conftest import GiB, LOAD_TIMEOUT_MS
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle
from tests.gguf.models import K_ROW

Q8_0_EXPERT_BYTES = 3 * (K_ROW * K_ROW // 32) * 34  # gate, up, down: 256 x 256 each, 34 bytes per 32 weights


def engine_marks(model: str):
    """The engine's own BudgetMarks of the file on the CPU, as the app loads it."""
    from engine.api import EngineOptions, budget_marks as marks_of

    return marks_of(EngineOptions(model=model, device="cpu", experts="paged"))


def paging_budget(model: str) -> int:
    """A budget between the engine's minimum and all-resident marks: fewer slots than experts per layer."""
    marks = engine_marks(model)
    return marks.minimum + (marks.all_resident - marks.minimum) // 2


def pager_parts(panel):
    return (panel.hit_rate_chart, panel.h2d_chart, panel.curve, panel.controller_label)


def picker_fit(qtbot, window, model: str) -> str:
    """The model picker's plan for `model` at the slider's budget."""
    picker = window.open_model_picker()
    with qtbot.waitSignal(picker.scanned, timeout=10_000):
        picker.add_path(model)
    picker.close()
    return next(row for row in picker.model.rows if row.entry.path == model).fit


def test_a_gguf_on_wisps_engine_pages_experts_live_and_llama_cpp_reloads_it(qtbot, start_app, gguf_model):
    window = start_app(model=gguf_model, budget_bytes=paging_budget(gguf_model))
    engine, panel, slider = window.loader.engine, window.memory_panel, window.memory_panel.budget_slider
    plan, num_experts = engine.stats().plan, engine.info.num_experts
    assert plan.mode == "paged" and plan.min_layer_slots < num_experts
    assert window.window_actions.gguf_auto.isChecked() and window.loader.request.options().backend == "auto"
    assert all(part.isVisibleTo(window) for part in pager_parts(panel))
    assert slider.slider.isEnabled() and slider.state_label.text() == ""
    qtbot.waitUntil(lambda: len(slider.marks.texts) == 2, timeout=10_000)  # the engine's marks for this file
    marks, size = engine_marks(gguf_model), panel._format_bytes
    assert slider.marks.texts == [f"minimum {size(marks.minimum)}", f"all resident {size(marks.all_resident)}"]

    use_greedy_sampling(window, max_tokens=12)
    qtbot.waitUntil(lambda: bool(panel.hit_rate_chart.values))  # a poll before the reply: a rate needs two
    type_and_send(qtbot, window, "count")
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: any(panel.hit_rate_chart.values), timeout=5000)  # a measured hit rate above 0
    stats = window.loader.engine.stats()
    assert stats.expert_misses > 0, "fewer slots than experts: the reply must have paged experts in"
    assert plan.expert_bytes == Q8_0_EXPERT_BYTES, "a slot holds the expert as stored in the file"
    panel.refresh()
    assert slots_text(stats.plan) in panel.plan_label.text()
    filled = next(s for s in memory_segments(stats.plan, stats) if s.key == "experts")
    assert filled.num_bytes == min(stats.expert_misses, plan.min_layer_slots * plan.num_moe_layers) * plan.expert_bytes
    assert f"Expert slots, filled {panel._format_bytes(filled.num_bytes)}" in panel.legend_text("experts")

    assert picker_fit(qtbot, window, gguf_model) == (
        f"pages experts ({plan.min_layer_slots} of {num_experts} slots per layer)")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000) as changed:
        slider.marks.click(1)  # all resident: the idle engine re-plans at once
    assert changed.args[0].error is None and changed.args[0].new.min_layer_slots == num_experts
    assert picker_fit(qtbot, window, gguf_model) == "fits: every expert resident"

    window.window_actions.gguf_llama_cpp.trigger()
    assert window.settings.gguf_engine == "llama.cpp" and window._settings_store.load().gguf_engine == "llama.cpp"
    qtbot.waitUntil(lambda: window.loader.engine not in (None, engine), timeout=LOAD_TIMEOUT_MS)
    assert window.loader.engine.stats().plan.mode == "llama.cpp"
    assert window.loader.request.options().backend == "llama.cpp"
    assert not any(part.isVisibleTo(window) for part in pager_parts(panel))
    assert slider.state_label.text() == NOT_APPLICABLE_TEXT and not slider.slider.isEnabled()
    assert budget_marks(window.loader.request) is None and not slider.marks.texts  # no Wisp plan, no marks

    assert picker_fit(qtbot, window, gguf_model) == LLAMA_CPP_FIT


def test_a_gguf_budget_below_its_minimum_is_refused_before_the_model_serving_is_closed(qtbot, start_app, gguf_model):
    window = start_app()
    engine, slider = window.loader.engine, window.memory_panel.budget_slider
    minimum = engine_marks(gguf_model).minimum
    slider.set_budget(minimum - 1024**2)
    with qtbot.waitSignal(window.loader.budget_refused, timeout=LOAD_TIMEOUT_MS) as refused:
        window.load_model(gguf_model)
    assert refused.args[1] == minimum and "minimum" in refused.args[0]
    qtbot.waitUntil(lambda: not window.loader.is_loading)
    assert window.loader.engine is engine, "the refused file must not have closed the model already serving"


def test_a_gguf_wisps_engine_cannot_run_follows_the_choice(app_gguf_files):
    """TQ1_0 is not among Wisp's types: auto and llama.cpp hand it to llama.cpp, Wisp's engine refuses it up front."""
    from engine.api import EngineOptions, fit_summary, scan_models

    path = str(app_gguf_files.quantized("qwen3_moe", "TQ1_0"))
    entry = next(entry for entry in scan_models([path]) if entry.path == path)
    expected = fit_summary(EngineOptions(model=path, budget_bytes=GiB))
    assert fit_at_budget(entry, GiB, "cpu", "auto").text == expected == "fits (llama.cpp)"
    assert fit_at_budget(entry, GiB, "cpu", "llama.cpp").text == LLAMA_CPP_FIT
    assert "TQ1_0" in fit_at_budget(entry, GiB, "cpu", "wisp").text
    for choice in ("auto", "llama.cpp"):
        request = LoadRequest(path, GiB, "cpu", gguf_engine=choice)
        check_before_unload(request)  # llama.cpp places the file itself: nothing for Wisp's planner to refuse
        assert budget_marks(request) is None
    with pytest.raises(_RefusedBeforeUnload):
        check_before_unload(LoadRequest(path, GiB, "cpu", gguf_engine="wisp"))
